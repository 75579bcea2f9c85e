// Package remoting implements the RocketMQ remoting transport: length-prefixed
// frames carrying a RemotingCommand header (JSON or the binary "ROCKETMQ"
// encoding) and an opaque body, multiplexed over one TCP connection by the
// opaque request id.
//
// The package knows nothing of RocketMQ semantics beyond the frame: request
// codes are plain integers here; their meaning lives in internal/protocol.
package remoting

import (
	"fmt"
	"strconv"
)

// SerializeType is the header encoding, carried in the high byte of the
// header-length field.
type SerializeType byte

// Header encodings.
const (
	SerializeJSON     SerializeType = 0
	SerializeRocketMQ SerializeType = 1
)

// String names the encoding.
func (t SerializeType) String() string {
	switch t {
	case SerializeJSON:
		return "JSON"
	case SerializeRocketMQ:
		return "ROCKETMQ"
	}
	return "SerializeType(" + strconv.Itoa(int(t)) + ")"
}

// Flag bits of a command.
const (
	FlagResponse int32 = 1 << 0
	FlagOneway   int32 = 1 << 1
)

// Version is the protocol version zonemq stamps on the commands it sends
// (RocketMQ V5_3_3's ordinal).
const Version int32 = 479

// Language is what zonemq writes in the header's language field.
const Language = "GO"

// Command is one RemotingCommand: a request, a response or a oneway request.
// A Command is not safe for concurrent mutation; once handed to a Conn it must
// not be changed.
type Command struct {
	Code     int32
	Language string
	Version  int32
	Opaque   int32
	Flag     int32
	Remark   string
	// ExtFields are the ext fields. On a received command they may still
	// be in their wire form (rawExt): read them with Ext or ExtValue, or
	// call ExtMap before using this field.
	ExtFields map[string]string
	// rawExt is a received binary header's ext fields, not decoded yet
	// (ExtMap decodes them into ExtFields); "" otherwise.
	rawExt string
	// Header, when set, writes the ext fields in place of ExtFields (which
	// is then ignored when encoding): a typed header of a hot path that
	// skips the map. Only on commands being sent; Ext does not see it.
	Header ExtHeader
	Body   []byte
	// Encoded, when set, is called once the command has been handed to a
	// Conn's Write (or Respond) and that call returned: its frame is
	// encoded, or was never going to be, so Body is not read again. A
	// handler that lent Body from a pool takes it back then; the Server
	// calls it for the responses its handlers return.
	Encoded func()

	// Serialize is the header encoding the command arrived in. Responses are
	// written in the encoding of the request they answer.
	Serialize SerializeType
}

// NewRequest returns a request command with the given code, ext fields and body.
func NewRequest(code int32, ext map[string]string, body []byte) *Command {
	return &Command{Code: code, Language: Language, Version: Version, ExtFields: ext, Body: body}
}

// NewResponse returns the response to req with the given code and remark. The
// response carries req's opaque and is encoded like req.
func NewResponse(req *Command, code int32, remark string) *Command {
	return &Command{
		Code:      code,
		Language:  Language,
		Version:   Version,
		Opaque:    req.Opaque,
		Flag:      FlagResponse,
		Remark:    remark,
		Serialize: req.Serialize,
	}
}

// IsResponse reports whether c is a response.
func (c *Command) IsResponse() bool { return c.Flag&FlagResponse != 0 }

// IsOneway reports whether c is a request that expects no response.
func (c *Command) IsOneway() bool { return c.Flag&FlagOneway != 0 }

// Ext returns the ext field k, or "" when absent.
func (c *Command) Ext(k string) string {
	v, _ := c.ExtValue(k)
	return v
}

// ExtValue returns the ext field k and whether it is present. Fields still
// in their wire form are read where they are, without building the map.
func (c *Command) ExtValue(k string) (string, bool) {
	if c.rawExt != "" {
		return binaryExtValue(c.rawExt, k)
	}
	v, ok := c.ExtFields[k]
	return v, ok
}

// ExtMap returns the ext fields as a map, decoding them first if they are
// still in their wire form; ExtFields holds the same map afterwards.
func (c *Command) ExtMap() map[string]string {
	if c.rawExt != "" {
		c.ExtFields = binaryExtMap(c.rawExt)
		c.rawExt = ""
	}
	return c.ExtFields
}

// SetExt sets the ext field k to v, allocating the map if needed.
func (c *Command) SetExt(k, v string) {
	c.ExtMap()
	if c.ExtFields == nil {
		c.ExtFields = make(map[string]string, 4)
	}
	c.ExtFields[k] = v
}

// String describes the command for logs (never the body).
func (c *Command) String() string {
	kind := "request"
	if c.IsResponse() {
		kind = "response"
	} else if c.IsOneway() {
		kind = "oneway"
	}
	ext := c.ExtFields
	if c.rawExt != "" {
		ext = binaryExtMap(c.rawExt) // not stored: String must not change c
	}
	return fmt.Sprintf("%s code=%d opaque=%d remark=%q ext=%v body=%dB", kind, c.Code, c.Opaque, c.Remark, ext, len(c.Body))
}
