package broker

import (
	"encoding/json"
	"fmt"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
)

// errorf answers req with code and a remark for the client. The remark says
// what was wrong in the client's terms; internal causes go to the log.
func errorf(req *remoting.Command, code protocol.ResponseCode, format string, a ...any) *remoting.Command {
	return remoting.NewResponse(req, int32(code), fmt.Sprintf(format, a...))
}

// badHeader answers a request whose ext fields do not parse: the remark
// names the request and the field.
func badHeader(req *remoting.Command, err error) *remoting.Command {
	return errorf(req, protocol.InvalidParameter, "%s: %v", protocol.RequestCode(req.Code), err)
}

// success answers req with SUCCESS, the given ext fields and body.
func success(req *remoting.Command, ext map[string]string, body []byte) *remoting.Command {
	resp := remoting.NewResponse(req, int32(protocol.Success), "")
	resp.ExtFields = ext
	resp.Body = body
	return resp
}

// successJSON answers req with SUCCESS and v encoded as the body.
func successJSON(req *remoting.Command, v any) *remoting.Command {
	body, err := json.Marshal(v)
	if err != nil {
		return errorf(req, protocol.SystemError, "encoding the answer: %v", err)
	}
	return success(req, nil, body)
}
