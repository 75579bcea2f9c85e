package protocol

// ProducerGroupRequestHeader names a producer group: the header of
// GET_PRODUCER_CONNECTION_LIST.
type ProducerGroupRequestHeader struct {
	ProducerGroup string
}

// Ext renders the header.
func (h *ProducerGroupRequestHeader) Ext() map[string]string {
	return ExtWriter{}.Str("producerGroup", h.ProducerGroup)
}

// SetExt reads the header.
func (h *ProducerGroupRequestHeader) SetExt(ext map[string]string) error {
	r := NewExtReader(ext)
	h.ProducerGroup = r.String("producerGroup")
	return r.Err()
}

// ProducerConnection is GET_PRODUCER_CONNECTION_LIST's answer: the group's
// connected producers.
type ProducerConnection struct {
	ConnectionSet []Connection `json:"connectionSet"`
}
