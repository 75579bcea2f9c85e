package remoting

import (
	"encoding/binary"
	"strconv"
	"sync"
)

// ExtHeader is a typed request or response header that writes its ext
// fields straight into the frame (Command.Header): no map to build, no keys
// to sort. The hot paths' headers (a send and its answer) implement it.
type ExtHeader interface {
	EncodeExt(e *ExtEncoder)
}

// ExtEncoder appends ext fields to a frame being encoded, in the frame's
// header encoding. Values are written as the map form would hold them:
// integers in decimal, booleans as true or false.
type ExtEncoder struct {
	dst  []byte
	json bool
	n    int // fields written
}

// extEncoders recycles encoders: one handed to an ExtHeader (an interface
// call) escapes, which would cost an allocation per frame.
var extEncoders = sync.Pool{New: func() any { return new(ExtEncoder) }}

func getExtEncoder(dst []byte, json bool) *ExtEncoder {
	e := extEncoders.Get().(*ExtEncoder)
	*e = ExtEncoder{dst: dst, json: json}
	return e
}

func putExtEncoder(e *ExtEncoder) {
	*e = ExtEncoder{} // drop the buffer: it belongs to the caller
	extEncoders.Put(e)
}

// Str writes a string field.
func (e *ExtEncoder) Str(k, v string) {
	if e.json {
		e.jsonKey(k)
		e.dst = appendJSONString(e.dst, v)
		return
	}
	e.dst = binary.BigEndian.AppendUint16(e.dst, uint16(len(k)))
	e.dst = append(e.dst, k...)
	e.dst = binary.BigEndian.AppendUint32(e.dst, uint32(len(v)))
	e.dst = append(e.dst, v...)
}

// OptStr writes a string field unless it is empty.
func (e *ExtEncoder) OptStr(k, v string) {
	if v != "" {
		e.Str(k, v)
	}
}

// Int writes an integer field.
func (e *ExtEncoder) Int(k string, v int64) {
	if e.json {
		e.jsonKey(k)
		e.dst = append(e.dst, '"')
		e.dst = strconv.AppendInt(e.dst, v, 10)
		e.dst = append(e.dst, '"')
		return
	}
	e.dst = binary.BigEndian.AppendUint16(e.dst, uint16(len(k)))
	e.dst = append(e.dst, k...)
	at := len(e.dst)
	e.dst = append(e.dst, 0, 0, 0, 0)
	e.dst = strconv.AppendInt(e.dst, v, 10)
	binary.BigEndian.PutUint32(e.dst[at:], uint32(len(e.dst)-at-4))
}

// Bool writes a boolean field.
func (e *ExtEncoder) Bool(k string, v bool) {
	if v {
		e.Str(k, "true")
	} else {
		e.Str(k, "false")
	}
}

// jsonKey writes the separator and "k": of a JSON field.
func (e *ExtEncoder) jsonKey(k string) {
	if e.n > 0 {
		e.dst = append(e.dst, ',')
	}
	e.n++
	e.dst = appendJSONString(e.dst, k)
	e.dst = append(e.dst, ':')
}
