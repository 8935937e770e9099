// Package test is the integration harness that the tests of every other
// package use: network namespaces with veth pairs, DPDK testpmd peers
// (virtio-user front-ends and vhost-user back-ends) and QEMU guests with
// vhost-user NICs. The skip policy for tests that need privileges or tools
// is test/require. No production package imports it.
package test
