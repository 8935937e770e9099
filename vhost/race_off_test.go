//go:build !race

package vhost

const raceEnabled = false
