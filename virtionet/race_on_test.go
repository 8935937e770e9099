//go:build race

package virtionet

// raceEnabled: the race detector allocates where the code does not, so
// allocation counts under it mean nothing.
const raceEnabled = true
