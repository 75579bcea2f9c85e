package protocol

import (
	"fmt"
	"strconv"

	"github.com/zonemq/zonemq/internal/remoting"
)

// Header is a typed request or response header: it maps to and from a
// command's ext fields. Every header type in this package implements it, and
// the round-trip test runs over all of them.
type Header interface {
	// Ext renders the header as ext fields (all values strings).
	Ext() map[string]string
	// SetExt fills the header from ext fields, reporting the first missing
	// required field or malformed value.
	SetExt(ext map[string]string) error
}

// ExtReader reads typed values from ext fields and keeps the first error, so
// a header's SetExt reads every field and checks once at the end.
type ExtReader struct {
	ext map[string]string
	// cmd, when set, is read in place of ext: a received command whose
	// fields may still be in their wire form (remoting.Command.ExtValue).
	cmd *remoting.Command
	// slots, when useSlots, is read in place of both: a send header's
	// fields gathered in one pass over the wire form (sendSlots). Held by
	// value: a pointer would make escape analysis move the slots to the
	// heap, as the values read flow into the header.
	slots    sendSlots
	useSlots bool
	// short, when set, maps the field names asked for to the keys they
	// are sent under (SEND_MESSAGE_V2's a–n); errors still name the field.
	short map[string]string
	err   error
}

// NewExtReader returns a reader over ext (which may be nil).
func NewExtReader(ext map[string]string) *ExtReader { return &ExtReader{ext: ext} }

// CommandExtReader returns a reader over cmd's ext fields that does not
// make cmd decode them into a map.
func CommandExtReader(cmd *remoting.Command) *ExtReader { return &ExtReader{cmd: cmd} }

// Err is the first error met.
func (r *ExtReader) Err() error { return r.err }

func (r *ExtReader) fail(key, val, want string) {
	if r.err == nil {
		r.err = fmt.Errorf("ext field %s=%q is not %s", key, val, want)
	}
}

func (r *ExtReader) get(key string, required bool) (string, bool) {
	wire := key
	if r.short != nil {
		wire = r.short[key]
	}
	var v string
	var ok bool
	if r.useSlots {
		v, ok = r.slots.get(key)
	} else if r.cmd != nil {
		v, ok = r.cmd.ExtValue(wire)
	} else {
		v, ok = r.ext[wire]
	}
	if !ok && required && r.err == nil {
		r.err = fmt.Errorf("missing ext field %s", key)
	}
	return v, ok
}

// String returns a required string field.
func (r *ExtReader) String(key string) string {
	v, _ := r.get(key, true)
	return v
}

// OptString returns an optional string field.
func (r *ExtReader) OptString(key string) string {
	v, _ := r.get(key, false)
	return v
}

// Int32 returns a required int32 field.
func (r *ExtReader) Int32(key string) int32 { return int32(r.int(key, true, 0, 32)) }

// OptInt32 returns an optional int32 field or def.
func (r *ExtReader) OptInt32(key string, def int32) int32 {
	return int32(r.int(key, false, int64(def), 32))
}

// Int64 returns a required int64 field.
func (r *ExtReader) Int64(key string) int64 { return r.int(key, true, 0, 64) }

// OptInt64 returns an optional int64 field or def.
func (r *ExtReader) OptInt64(key string, def int64) int64 { return r.int(key, false, def, 64) }

func (r *ExtReader) int(key string, required bool, def int64, bits int) int64 {
	v, ok := r.get(key, required)
	if !ok || (v == "" && !required) {
		return def
	}
	n, err := strconv.ParseInt(v, 10, bits)
	if err != nil {
		r.fail(key, v, fmt.Sprintf("a %d-bit integer", bits))
		return def
	}
	return n
}

// OptBool returns an optional boolean field or def.
func (r *ExtReader) OptBool(key string, def bool) bool {
	v, ok := r.get(key, false)
	if !ok || v == "" {
		return def
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		r.fail(key, v, "a boolean")
		return def
	}
	return b
}

// ExtWriter builds ext fields.
type ExtWriter map[string]string

// newExtWriter returns a writer sized for n fields, so filling it does not
// grow the map step by step.
func newExtWriter(n int) ExtWriter { return make(ExtWriter, n) }

// Str sets a string field.
func (w ExtWriter) Str(k, v string) ExtWriter { w[k] = v; return w }

// OptStr sets a string field only if it is not empty.
func (w ExtWriter) OptStr(k, v string) ExtWriter {
	if v != "" {
		w[k] = v
	}
	return w
}

// Int sets an integer field.
func (w ExtWriter) Int(k string, v int64) ExtWriter { w[k] = strconv.FormatInt(v, 10); return w }

// Bool sets a boolean field.
func (w ExtWriter) Bool(k string, v bool) ExtWriter { w[k] = strconv.FormatBool(v); return w }

// Ext field names zonemq and RocketMQ 5 use for zones.
const (
	ExtZoneName = "__ZONE_NAME"
	ExtZoneMode = "__ZONE_MODE"
)
