// Package test is the integration harness that the tests of every other
// package use: QEMU guests with vhost-user NICs. DPDK testpmd peers are
// test/testpmd, network namespaces and veth pairs test/netns, and the skip
// policy for tests that need privileges or tools test/require. No
// production package imports it.
package test
