//go:build !race

package vswitch

// raceEnabled: see race_on_test.go.
const raceEnabled = false
