package client

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
)

// Errors a client returns. Test for them with errors.Is; responses from a
// server come as *ResponseError, failed sends as *SendError.
var (
	// ErrNotStarted is returned by calls made before Start.
	ErrNotStarted = errors.New("zonemq client: not started")
	// ErrShutdown is returned by calls made after Shutdown.
	ErrShutdown = errors.New("zonemq client: shut down")
	// ErrTimeout means a peer did not answer in time. The connection to it
	// was closed.
	ErrTimeout = errors.New("zonemq client: request timed out")
	// ErrUnreachable means a connection to a peer could not be opened or
	// broke while a request was outstanding.
	ErrUnreachable = errors.New("zonemq client: peer unreachable")
	// ErrNoNameServer means no name server could be asked: none is known,
	// or every one failed.
	ErrNoNameServer = errors.New("zonemq client: no name server available")
	// ErrUnknownIDC means ClientConfig.IDC names an IDC the address servers
	// do not list (see ClientConfig.AllowUnknownIDC).
	ErrUnknownIDC = errors.New("zonemq client: unknown IDC")
	// ErrNoRoute means the topic has no usable queue: it does not exist and
	// cannot be auto-created, or none of its brokers is alive.
	ErrNoRoute = errors.New("zonemq client: no route to the topic")
	// ErrNoOffset is returned by QueryOffset when the group has committed no
	// offset for the queue.
	ErrNoOffset = errors.New("zonemq client: no committed offset")
	// ErrInvalidMessage wraps the reason a message was refused before it was
	// sent (empty topic or body, too large, ...).
	ErrInvalidMessage = errors.New("zonemq client: invalid message")
)

// ResponseCode is a RocketMQ response code, as a broker or name server sent it.
type ResponseCode int32

// Response codes a client may see in a ResponseError.
const (
	CodeSuccess                 ResponseCode = 0
	CodeSystemError             ResponseCode = 1
	CodeSystemBusy              ResponseCode = 2
	CodeRequestCodeNotSupported ResponseCode = 3
	CodeFlushDiskTimeout        ResponseCode = 10
	CodeSlaveNotAvailable       ResponseCode = 11
	CodeFlushSlaveTimeout       ResponseCode = 12
	CodeMessageIllegal          ResponseCode = 13
	CodeServiceNotAvailable     ResponseCode = 14
	CodeNoPermission            ResponseCode = 16
	CodeTopicNotExist           ResponseCode = 17
	CodePullNotFound            ResponseCode = 19
	CodePullRetryImmediately    ResponseCode = 20
	CodePullOffsetMoved         ResponseCode = 21
	CodeQueryNotFound           ResponseCode = 22
	CodeSubscriptionNotExist    ResponseCode = 24
	CodeSubscriptionNotLatest   ResponseCode = 25
	CodeInvalidParameter        ResponseCode = 29
)

// String names the code as RocketMQ does (e.g. "MESSAGE_ILLEGAL").
func (c ResponseCode) String() string { return protocol.ResponseCode(c).String() }

// Retryable reports whether a send that got this code may succeed on another
// broker.
func (c ResponseCode) Retryable() bool { return protocol.ResponseCode(c).Retryable() }

// ResponseError is an error answer from a broker or a name server.
type ResponseError struct {
	// Op is the request that failed, e.g. "SEND_MESSAGE".
	Op string
	// Addr is the server that answered.
	Addr string
	// Code is the response code.
	Code ResponseCode
	// Remark is the server's explanation, if it sent one.
	Remark string
	// NotMaster is set on a refused send when the broker said it is not,
	// or no longer, its group's master (a replica, a master fenced by its
	// failover controller, a switchover under way): the group may have a
	// new master, which the producer looks up and retries on.
	NotMaster bool
}

func (e *ResponseError) Error() string {
	s := fmt.Sprintf("zonemq client: %s to %s: %s", e.Op, e.Addr, e.Code)
	if e.Remark != "" {
		s += ": " + e.Remark
	}
	return s
}

// Is matches another *ResponseError with the same Code, so
// errors.Is(err, &ResponseError{Code: CodeMessageIllegal}) works.
func (e *ResponseError) Is(target error) bool {
	t, ok := target.(*ResponseError)
	return ok && t.Code == e.Code
}

// Retryable reports whether the request may succeed elsewhere.
func (e *ResponseError) Retryable() bool { return e.Code.Retryable() }

// SendError is returned by a send when every broker it tried failed, or the
// send's timeout passed. Attempts lists each try in order.
type SendError struct {
	Topic    string
	Attempts []AttemptError
	// Err is why the send stopped, when that was not the last attempt's
	// failure (e.g. the deadline passed, or no broker was left to try).
	Err error
}

// AttemptError is one failed attempt of a send.
type AttemptError struct {
	Broker string
	Addr   string
	IDC    string
	Err    error
}

func (e *SendError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "zonemq client: send to topic %s failed", e.Topic)
	if e.Err != nil {
		fmt.Fprintf(&b, ": %v", e.Err)
	}
	for i, a := range e.Attempts {
		if i == 0 {
			b.WriteString(" (attempts:")
		} else {
			b.WriteString(";")
		}
		fmt.Fprintf(&b, " %s@%s/%s: %v", a.Broker, a.Addr, a.IDC, a.Err)
	}
	if len(e.Attempts) > 0 {
		b.WriteString(")")
	}
	return b.String()
}

// Unwrap returns the stop reason and every attempt's error, so errors.Is and
// errors.As look through all of them.
func (e *SendError) Unwrap() []error {
	out := make([]error, 0, len(e.Attempts)+1)
	if e.Err != nil {
		out = append(out, e.Err)
	}
	for _, a := range e.Attempts {
		out = append(out, a.Err)
	}
	return out
}

// transportError turns a remoting error into the client's vocabulary: a
// timeout is ErrTimeout, a broken or refused connection ErrUnreachable, and
// a cancelled context stays itself.
func transportError(op, addr string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, remoting.ErrTimeout):
		return fmt.Errorf("%w: %s to %s", ErrTimeout, op, addr)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return err
	case errors.Is(err, remoting.ErrClientClosed):
		return ErrShutdown
	default:
		return fmt.Errorf("%w: %s to %s: %v", ErrUnreachable, op, addr, err)
	}
}

// retryable reports whether a failed request may succeed on another peer:
// transport failures and retryable response codes.
func retryable(err error) bool {
	if errors.Is(err, ErrTimeout) || errors.Is(err, ErrUnreachable) {
		return true
	}
	var re *ResponseError
	if errors.As(err, &re) {
		return re.Retryable()
	}
	return false
}

func responseError(op protocol.RequestCode, addr string, resp *remoting.Command) *ResponseError {
	return &ResponseError{Op: op.String(), Addr: addr, Code: ResponseCode(resp.Code), Remark: resp.Remark,
		NotMaster: resp.Ext(protocol.ExtNotMaster) == "true"}
}
