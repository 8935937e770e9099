// Package test is the integration harness that the tests of every other
// package use: DPDK testpmd peers (virtio-user front-ends and vhost-user
// back-ends) and QEMU guests with vhost-user NICs. Network namespaces and
// veth pairs are test/netns; the skip policy for tests that need
// privileges or tools is test/require. No production package imports it.
package test
