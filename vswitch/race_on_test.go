//go:build race

package vswitch

// raceEnabled: the race detector keeps shadow memory and histories of its
// own in the process, which grow with how long it ran, so the RSS says
// nothing about what the switch holds under it (leakcheck_test.go).
const raceEnabled = true
