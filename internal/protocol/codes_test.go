package protocol_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
	"github.com/zonemq/zonemq/internal/testutil"
)

func TestCodesResponseString(t *testing.T) {
	for code, want := range map[protocol.ResponseCode]string{
		protocol.Success:                 "SUCCESS",
		protocol.SystemError:             "SYSTEM_ERROR",
		protocol.RequestCodeNotSupported: "REQUEST_CODE_NOT_SUPPORTED",
		protocol.TopicNotExist:           "TOPIC_NOT_EXIST",
		protocol.PullNotFound:            "PULL_NOT_FOUND",
		protocol.QueryNotFound:           "QUERY_NOT_FOUND",
		protocol.FlowControl:             "FLOW_CONTROL",
		protocol.ResponseCode(9999):      "ResponseCode(9999)",
		protocol.ResponseCode(-1):        "ResponseCode(-1)",
	} {
		testutil.Equal(t, code.String(), want)
	}
	// The wire values RocketMQ defines.
	for code, want := range map[protocol.ResponseCode]int32{
		protocol.Success: 0, protocol.SystemError: 1, protocol.SystemBusy: 2, protocol.RequestCodeNotSupported: 3,
		protocol.FlushDiskTimeout: 10, protocol.SlaveNotAvailable: 11, protocol.FlushSlaveTimeout: 12,
		protocol.MessageIllegal: 13, protocol.ServiceNotAvailable: 14, protocol.NoPermission: 16,
		protocol.TopicNotExist: 17, protocol.PullNotFound: 19, protocol.PullRetryImmediately: 20,
		protocol.PullOffsetMoved: 21, protocol.QueryNotFound: 22, protocol.SubscriptionNotExist: 24,
		protocol.SubscriptionNotLatest: 25, protocol.InvalidParameter: 29, protocol.FlowControl: 215,
	} {
		testutil.Equal(t, int32(code), want, code)
	}
	// The transport's own two codes agree with protocol's.
	testutil.Equal(t, int32(protocol.SystemError), remoting.ResponseCodeSystemError)
	testutil.Equal(t, int32(protocol.RequestCodeNotSupported), remoting.ResponseCodeNotSupported)
}

// Retryable is what producer retry and IDC failover decide on.
func TestCodesRetryable(t *testing.T) {
	retryable := map[protocol.ResponseCode]bool{
		protocol.SystemError: true, protocol.SystemBusy: true, protocol.ServiceNotAvailable: true,
		protocol.NoPermission: true, protocol.TopicNotExist: true, protocol.FlowControl: true,
		// Not copied to the group's replicas: not acknowledged, retried.
		protocol.SlaveNotAvailable: true, protocol.FlushSlaveTimeout: true,
	}
	for _, code := range []protocol.ResponseCode{
		protocol.Success, protocol.SystemError, protocol.SystemBusy, protocol.RequestCodeNotSupported,
		protocol.TransactionFailed, protocol.FlushDiskTimeout, protocol.SlaveNotAvailable, protocol.FlushSlaveTimeout,
		protocol.MessageIllegal, protocol.ServiceNotAvailable, protocol.VersionNotSupported, protocol.NoPermission,
		protocol.TopicNotExist, protocol.TopicExistAlready, protocol.PullNotFound, protocol.PullRetryImmediately,
		protocol.PullOffsetMoved, protocol.QueryNotFound, protocol.SubscriptionParseFailed, protocol.SubscriptionNotExist,
		protocol.SubscriptionNotLatest, protocol.SubscriptionGroupNotExist, protocol.InvalidParameter,
		protocol.ConsumerNotOnline, protocol.FlowControl, protocol.IllegalOperation, protocol.ResponseCode(12345),
	} {
		testutil.Equal(t, code.Retryable(), retryable[code], code)
		err := &protocol.Error{Code: code}
		testutil.Equal(t, err.Retryable(), retryable[code], code)
	}
	for _, code := range []protocol.ResponseCode{protocol.Success, protocol.FlushDiskTimeout} {
		testutil.True(t, code.SendSucceeded(), code)
	}
	for _, code := range []protocol.ResponseCode{protocol.SystemError, protocol.MessageIllegal, protocol.TopicNotExist,
		protocol.FlushSlaveTimeout, protocol.SlaveNotAvailable} {
		testutil.True(t, !code.SendSucceeded(), code)
	}
}

func TestCodesError(t *testing.T) {
	err := &protocol.Error{Code: protocol.TopicNotExist, Remark: "No topic route info in name server for the topic: T"}
	testutil.Equal(t, err.Error(), "TOPIC_NOT_EXIST: No topic route info in name server for the topic: T")
	testutil.Equal(t, (&protocol.Error{Code: protocol.SystemBusy}).Error(), "SYSTEM_BUSY")
	var target *protocol.Error
	wrapped := fmt.Errorf("send to broker-a: %w", err)
	testutil.True(t, errors.As(wrapped, &target) && target.Code == protocol.TopicNotExist, "errors.As through %w")
}

func TestCodesRequestString(t *testing.T) {
	for code, want := range map[protocol.RequestCode]string{
		protocol.SendMessage:              "SEND_MESSAGE",
		protocol.PullMessage:              "PULL_MESSAGE",
		protocol.HeartBeat:                "HEART_BEAT",
		protocol.GetRouteInfoByTopic:      "GET_ROUTEINFO_BY_TOPIC",
		protocol.SendBatchMessage:         "SEND_BATCH_MESSAGE",
		protocol.BrokerHeartbeat:          "BROKER_HEARTBEAT",
		protocol.ClientHeartbeatToNamesrv: "ZONEMQ_CLIENT_HEARTBEAT",
		protocol.GetClientsByIDC:          "ZONEMQ_GET_CLIENTS",
		protocol.RequestCode(4242):        "RequestCode(4242)",
	} {
		testutil.Equal(t, code.String(), want)
	}
	for code, want := range map[protocol.RequestCode]int32{
		protocol.SendMessage: 10, protocol.PullMessage: 11, protocol.QueryConsumerOffset: 14,
		protocol.UpdateConsumerOffset: 15, protocol.HeartBeat: 34, protocol.GetConsumerListByGroup: 38,
		protocol.NotifyConsumerIDsChanged: 40, protocol.LockBatchMQ: 41, protocol.RegisterBroker: 103,
		protocol.GetRouteInfoByTopic: 105, protocol.SendMessageV2: 310, protocol.SendBatchMessage: 320,
		protocol.BrokerHeartbeat: 904, protocol.ClientHeartbeatToNamesrv: 9001, protocol.GetClientsByIDC: 9002,
	} {
		testutil.Equal(t, int32(code), want, code)
	}
	// zonemq's own codes must fit the binary header's int16 code field.
	testutil.True(t, int32(protocol.GetClientsByIDC) <= 32767, "int16")
}
