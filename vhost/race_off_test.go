//go:build !race

package vhost_test

const raceEnabled = false
