package vhost

// What the external tests (package vhost_test) compare against and cannot
// see from outside: the device's own offer, and a queue's published state.

// OfferedProtocolFeatures is what GET_PROTOCOL_FEATURES must answer.
const OfferedProtocolFeatures = offeredProtocolFeatures

// MaxMemSlots is what GET_MAX_MEM_SLOTS must answer.
const MaxMemSlots = maxMemSlots

// Unpublished reports whether the control path has taken q's running
// state away from the data path (GET_VRING_BASE stops the ring) and now
// waits for the burst that may still hold it.
func Unpublished(q *Queue) bool { return q.cur.Load().act == nil }
