package testpmd

// Pid returns testpmd's process ID (stdbuf execs dpdk-testpmd in place, so
// it is testpmd's own), for a benchmark that reads its CPU time and peak
// memory from /proc.
func (tp *Process) Pid() int { return tp.cmd.Process.Pid }
