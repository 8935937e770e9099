package guestmem

import (
	"runtime"
	"testing"
)

// TestStreamChoiceDecides feeds windows of samples and checks the way
// chosen: streaming only when its median is clearly (1/8) below the
// ordinary stores' median, whatever the outliers.
func TestStreamChoiceDecides(t *testing.T) {
	for _, tc := range []struct {
		name              string
		ordinary, stream  uint32
		outlier           uint32 // one sample of each way, much dearer
		want              bool
		wantOrd, wantStrm uint64
	}{
		{"far: streaming much cheaper", 1600, 900, 0, true, 0, 1},
		{"near: about the same", 1000, 950, 0, false, 1, 0},
		{"near: ordinary cheaper", 700, 1000, 0, false, 1, 0},
		{"just clearly cheaper", 1000, 874, 0, true, 0, 1},
		{"outliers do not decide", 1000, 1000, 1 << 30, false, 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := StreamChoice{stream: !tc.want, way: !tc.want}
			ord0, str0 := StreamWindows()
			for i := range windowSamples {
				o, s := tc.ordinary, tc.stream
				if i == 3 && tc.outlier != 0 {
					s = tc.outlier
				}
				c.add(false, o)
				c.add(true, s)
				if i < windowSamples-1 && c.Streaming() != !tc.want {
					t.Fatalf("decided after %d samples of each way", i+1)
				}
			}
			if c.Streaming() != tc.want || c.Streams() != tc.want {
				t.Errorf("Streaming %v, Streams %v; want %v", c.Streaming(), c.Streams(), tc.want)
			}
			ord1, str1 := StreamWindows()
			if o, s := ord1-ord0, str1-str0; o != tc.wantOrd || s != tc.wantStrm {
				t.Errorf("Windows %d, %d; want %d, %d", o, s, tc.wantOrd, tc.wantStrm)
			}
		})
	}
}

// TestStreamChoiceSamples checks the cadence: one burst in sampleEvery of
// minSampleFrames or more is timed, alternately in each way, a shorter one
// hands its turn to the next, and every other burst goes the chosen way.
func TestStreamChoiceSamples(t *testing.T) {
	if !haveStreamStores {
		c := NewStreamChoice()
		for range 4 * sampleEvery {
			if c.Begin(32); c.since != 0 || c.Streams() {
				t.Fatal("timed or streamed without streaming stores")
			}
		}
		return
	}
	c := NewStreamChoice()
	if !c.Streams() {
		t.Fatal("a new choice does not stream")
	}
	var timed, timedStreaming int
	for i := 1; i <= 8*sampleEvery+1; i++ { // +1: the short burst handed its turn on
		frames := 32
		if i == 2*sampleEvery {
			frames = minSampleFrames - 1
		}
		c.Begin(frames)
		way, isTimed := c.Streams(), c.since != 0
		c.Restart()
		c.End(frames, way)
		switch {
		case !isTimed && !way:
			t.Fatalf("burst %d: untimed and not the chosen way", i)
		case isTimed && frames < minSampleFrames:
			t.Fatalf("burst %d of %d frames timed", i, frames)
		case isTimed:
			timed++
			if way {
				timedStreaming++
			}
		}
		if c.Streams() != c.Streaming() {
			t.Fatalf("burst %d: End left the burst's way, not the chosen one", i)
		}
	}
	if timed != 8 || timedStreaming != 4 {
		t.Errorf("timed %d bursts, %d streaming; want 8 and 4", timed, timedStreaming)
	}
	allocs := testing.AllocsPerRun(1000, func() {
		c.Begin(32)
		c.Restart()
		c.End(32, c.Streams())
	})
	if allocs != 0 {
		t.Errorf("%v allocations a burst", allocs)
	}
}

// TestStreamChoiceNoSample: a timed burst that took no frame, or that was
// to stream and streamed none (frames too long, buffers that start
// nowhere a line can be streamed), is no sample: no window is decided on
// such bursts, and the way goes back to the one chosen.
func TestStreamChoiceNoSample(t *testing.T) {
	if !haveStreamStores {
		t.Skip("no streaming stores on " + runtime.GOARCH + ": nothing is timed")
	}
	for _, tc := range []struct {
		name   string
		frames func(way bool) int
	}{
		{"nothing streamed", func(bool) int { return 32 }},
		{"no frame", func(bool) int { return 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := NewStreamChoice()
			ord0, str0 := StreamWindows()
			timed := 0
			for range 4 * windowSamples * sampleEvery {
				c.Begin(32)
				way := c.Streams()
				if c.since != 0 {
					timed++
				}
				c.Restart()
				c.End(tc.frames(way), false)
				if c.Streams() != c.Streaming() {
					t.Fatal("End left the burst's way, not the chosen one")
				}
			}
			ord1, str1 := StreamWindows()
			if timed != 4*windowSamples {
				t.Fatalf("%d bursts timed, want %d", timed, 4*windowSamples)
			}
			if ord1 != ord0 || str1 != str0 || c.taken[1] != 0 {
				t.Errorf("windows decided: %d ordinary, %d streaming; streaming samples %d; want none", ord1-ord0, str1-str0, c.taken[1])
			}
		})
	}
}
