// Package drivertest plays the driver (the guest) side of virtqueues for
// tests: fake guest memory with several regions, and driver models that
// build packed and split rings in it as a real driver does. Only tests
// import it.
package drivertest
