//go:build !race

package virtionet

const raceEnabled = false
