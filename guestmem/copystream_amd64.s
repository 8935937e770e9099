#include "textflag.h"

// func copyLines(dst, src unsafe.Pointer, lines int)
// dst is 64-byte aligned, lines >= 1; src any alignment.
TEXT ·copyLines(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ lines+16(FP), CX
loop:
	MOVOU 0(SI), X0
	MOVOU 16(SI), X1
	MOVOU 32(SI), X2
	MOVOU 48(SI), X3
	MOVNTO X0, 0(DI)
	MOVNTO X1, 16(DI)
	MOVNTO X2, 32(DI)
	MOVNTO X3, 48(DI)
	ADDQ $64, SI
	ADDQ $64, DI
	DECQ CX
	JNZ loop
	RET

// func StreamFence()
TEXT ·StreamFence(SB), NOSPLIT, $0-0
	SFENCE
	RET
