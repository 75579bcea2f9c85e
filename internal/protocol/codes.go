// Package protocol holds RocketMQ's semantics on top of the remoting frame:
// request and response codes, typed request headers, route and registration
// bodies, the stored-message codec, message ids, properties, limits and
// validators.
package protocol

import "strconv"

// RequestCode is the code of a request command.
type RequestCode int32

// Request codes (RocketMQ's RequestCode), plus zonemq's own above 9000.
const (
	SendMessage                    RequestCode = 10
	PullMessage                    RequestCode = 11
	QueryMessage                   RequestCode = 12
	QueryConsumerOffset            RequestCode = 14
	UpdateConsumerOffset           RequestCode = 15
	UpdateAndCreateTopic           RequestCode = 17
	GetAllTopicConfig              RequestCode = 21
	UpdateBrokerConfig             RequestCode = 25
	GetBrokerConfig                RequestCode = 26
	GetBrokerRuntimeInfo           RequestCode = 28
	SearchOffsetByTimestamp        RequestCode = 29
	GetMaxOffset                   RequestCode = 30
	GetMinOffset                   RequestCode = 31
	GetEarliestMsgStoretime        RequestCode = 32
	ViewMessageByID                RequestCode = 33
	HeartBeat                      RequestCode = 34
	UnregisterClient               RequestCode = 35
	ConsumerSendMsgBack            RequestCode = 36
	EndTransaction                 RequestCode = 37
	GetConsumerListByGroup         RequestCode = 38
	CheckTransactionState          RequestCode = 39
	NotifyConsumerIDsChanged       RequestCode = 40
	LockBatchMQ                    RequestCode = 41
	UnlockBatchMQ                  RequestCode = 42
	GetAllConsumerOffset           RequestCode = 43
	GetAllDelayOffset              RequestCode = 45
	CheckClientConfig              RequestCode = 46
	PutKVConfig                    RequestCode = 100
	GetKVConfig                    RequestCode = 101
	DeleteKVConfig                 RequestCode = 102
	RegisterBroker                 RequestCode = 103
	UnregisterBroker               RequestCode = 104
	GetRouteInfoByTopic            RequestCode = 105
	GetBrokerClusterInfo           RequestCode = 106
	UpdateAndCreateSubscriptionGrp RequestCode = 200
	GetAllSubscriptionGroupConfig  RequestCode = 201
	GetTopicStatsInfo              RequestCode = 202
	GetConsumerConnectionList      RequestCode = 203
	GetProducerConnectionList      RequestCode = 204
	WipeWritePermOfBroker          RequestCode = 205
	GetAllTopicListFromNameServer  RequestCode = 206
	DeleteSubscriptionGroup        RequestCode = 207
	GetConsumeStats                RequestCode = 208
	GetKVListByNamespace           RequestCode = 219
	ResetConsumerClientOffset      RequestCode = 220
	GetConsumerStatusFromClient    RequestCode = 221
	InvokeBrokerToResetOffset      RequestCode = 222
	QueryTopicConsumeByWho         RequestCode = 300
	GetTopicsByCluster             RequestCode = 224
	DeleteTopicInBroker            RequestCode = 215
	DeleteTopicInNamesrv           RequestCode = 216
	RegisterTopicInNamesrv         RequestCode = 217
	GetConsumerRunningInfo         RequestCode = 307
	ConsumeMessageDirectly         RequestCode = 309
	SendMessageV2                  RequestCode = 310
	SendBatchMessage               RequestCode = 320
	QueryDataVersion               RequestCode = 322
	SendReplyMessage               RequestCode = 324
	BrokerHeartbeat                RequestCode = 904

	// ClientHeartbeatToNamesrv is zonemq's own: a client tells a name server
	// it is alive (see docs/protocol.md). Outside RocketMQ's ranges.
	ClientHeartbeatToNamesrv RequestCode = 9001
	// GetClientsByIDC is zonemq's own: the live clients a name server knows.
	GetClientsByIDC RequestCode = 9002
)

var requestNames = map[RequestCode]string{
	UpdateBrokerConfig: "UPDATE_BROKER_CONFIG", GetBrokerConfig: "GET_BROKER_CONFIG",
	SendMessage: "SEND_MESSAGE", PullMessage: "PULL_MESSAGE", QueryMessage: "QUERY_MESSAGE",
	QueryConsumerOffset: "QUERY_CONSUMER_OFFSET", UpdateConsumerOffset: "UPDATE_CONSUMER_OFFSET",
	UpdateAndCreateTopic: "UPDATE_AND_CREATE_TOPIC", GetAllTopicConfig: "GET_ALL_TOPIC_CONFIG",
	GetBrokerRuntimeInfo: "GET_BROKER_RUNTIME_INFO", SearchOffsetByTimestamp: "SEARCH_OFFSET_BY_TIMESTAMP",
	GetMaxOffset: "GET_MAX_OFFSET", GetMinOffset: "GET_MIN_OFFSET", GetEarliestMsgStoretime: "GET_EARLIEST_MSG_STORETIME",
	ViewMessageByID: "VIEW_MESSAGE_BY_ID", HeartBeat: "HEART_BEAT", UnregisterClient: "UNREGISTER_CLIENT",
	ConsumerSendMsgBack: "CONSUMER_SEND_MSG_BACK", EndTransaction: "END_TRANSACTION",
	GetConsumerListByGroup: "GET_CONSUMER_LIST_BY_GROUP", CheckTransactionState: "CHECK_TRANSACTION_STATE",
	NotifyConsumerIDsChanged: "NOTIFY_CONSUMER_IDS_CHANGED", LockBatchMQ: "LOCK_BATCH_MQ", UnlockBatchMQ: "UNLOCK_BATCH_MQ",
	GetAllConsumerOffset: "GET_ALL_CONSUMER_OFFSET", GetAllDelayOffset: "GET_ALL_DELAY_OFFSET",
	CheckClientConfig: "CHECK_CLIENT_CONFIG",
	PutKVConfig:       "PUT_KV_CONFIG", GetKVConfig: "GET_KV_CONFIG", DeleteKVConfig: "DELETE_KV_CONFIG",
	RegisterBroker: "REGISTER_BROKER", UnregisterBroker: "UNREGISTER_BROKER", GetRouteInfoByTopic: "GET_ROUTEINFO_BY_TOPIC",
	GetBrokerClusterInfo: "GET_BROKER_CLUSTER_INFO", UpdateAndCreateSubscriptionGrp: "UPDATE_AND_CREATE_SUBSCRIPTIONGROUP",
	GetAllSubscriptionGroupConfig: "GET_ALL_SUBSCRIPTIONGROUP_CONFIG", GetTopicStatsInfo: "GET_TOPIC_STATS_INFO",
	GetConsumerConnectionList: "GET_CONSUMER_CONNECTION_LIST", GetProducerConnectionList: "GET_PRODUCER_CONNECTION_LIST",
	WipeWritePermOfBroker: "WIPE_WRITE_PERM_OF_BROKER", GetAllTopicListFromNameServer: "GET_ALL_TOPIC_LIST_FROM_NAMESERVER",
	DeleteSubscriptionGroup: "DELETE_SUBSCRIPTIONGROUP", GetConsumeStats: "GET_CONSUME_STATS",
	GetKVListByNamespace: "GET_KVLIST_BY_NAMESPACE", ResetConsumerClientOffset: "RESET_CONSUMER_CLIENT_OFFSET",
	GetConsumerStatusFromClient: "GET_CONSUMER_STATUS_FROM_CLIENT", InvokeBrokerToResetOffset: "INVOKE_BROKER_TO_RESET_OFFSET",
	QueryTopicConsumeByWho: "QUERY_TOPIC_CONSUME_BY_WHO", GetTopicsByCluster: "GET_TOPICS_BY_CLUSTER",
	DeleteTopicInBroker: "DELETE_TOPIC_IN_BROKER", DeleteTopicInNamesrv: "DELETE_TOPIC_IN_NAMESRV",
	RegisterTopicInNamesrv: "REGISTER_TOPIC_IN_NAMESRV", GetConsumerRunningInfo: "GET_CONSUMER_RUNNING_INFO",
	ConsumeMessageDirectly: "CONSUME_MESSAGE_DIRECTLY", SendMessageV2: "SEND_MESSAGE_V2",
	SendBatchMessage: "SEND_BATCH_MESSAGE", QueryDataVersion: "QUERY_DATA_VERSION", SendReplyMessage: "SEND_REPLY_MESSAGE",
	BrokerHeartbeat: "BROKER_HEARTBEAT", ClientHeartbeatToNamesrv: "ZONEMQ_CLIENT_HEARTBEAT", GetClientsByIDC: "ZONEMQ_GET_CLIENTS",
}

// String names the request code as RocketMQ does.
func (c RequestCode) String() string {
	if n, ok := requestNames[c]; ok {
		return n
	}
	return "RequestCode(" + strconv.Itoa(int(c)) + ")"
}

// ResponseCode is the code of a response command.
type ResponseCode int32

// Response codes (RocketMQ's ResponseCode).
const (
	Success                    ResponseCode = 0
	SystemError                ResponseCode = 1
	SystemBusy                 ResponseCode = 2
	RequestCodeNotSupported    ResponseCode = 3
	TransactionFailed          ResponseCode = 4
	FlushDiskTimeout           ResponseCode = 10
	SlaveNotAvailable          ResponseCode = 11
	FlushSlaveTimeout          ResponseCode = 12
	MessageIllegal             ResponseCode = 13
	ServiceNotAvailable        ResponseCode = 14
	VersionNotSupported        ResponseCode = 15
	NoPermission               ResponseCode = 16
	TopicNotExist              ResponseCode = 17
	TopicExistAlready          ResponseCode = 18
	PullNotFound               ResponseCode = 19
	PullRetryImmediately       ResponseCode = 20
	PullOffsetMoved            ResponseCode = 21
	QueryNotFound              ResponseCode = 22
	SubscriptionParseFailed    ResponseCode = 23
	SubscriptionNotExist       ResponseCode = 24
	SubscriptionNotLatest      ResponseCode = 25
	SubscriptionGroupNotExist  ResponseCode = 26
	InvalidParameter           ResponseCode = 29
	TransactionShouldCommit    ResponseCode = 200
	TransactionShouldRollback  ResponseCode = 201
	TransactionStateUnknow     ResponseCode = 202
	TransactionStateGroupWrong ResponseCode = 203
	ConsumerNotOnline          ResponseCode = 206
	ConsumeMsgTimeout          ResponseCode = 207
	NoMessage                  ResponseCode = 208
	FlowControl                ResponseCode = 215
	IllegalOperation           ResponseCode = 604
)

var responseNames = map[ResponseCode]string{
	Success: "SUCCESS", SystemError: "SYSTEM_ERROR", SystemBusy: "SYSTEM_BUSY",
	RequestCodeNotSupported: "REQUEST_CODE_NOT_SUPPORTED", TransactionFailed: "TRANSACTION_FAILED",
	FlushDiskTimeout: "FLUSH_DISK_TIMEOUT", SlaveNotAvailable: "SLAVE_NOT_AVAILABLE", FlushSlaveTimeout: "FLUSH_SLAVE_TIMEOUT",
	MessageIllegal: "MESSAGE_ILLEGAL", ServiceNotAvailable: "SERVICE_NOT_AVAILABLE", VersionNotSupported: "VERSION_NOT_SUPPORTED",
	NoPermission: "NO_PERMISSION", TopicNotExist: "TOPIC_NOT_EXIST", TopicExistAlready: "TOPIC_EXIST_ALREADY",
	PullNotFound: "PULL_NOT_FOUND", PullRetryImmediately: "PULL_RETRY_IMMEDIATELY", PullOffsetMoved: "PULL_OFFSET_MOVED",
	QueryNotFound: "QUERY_NOT_FOUND", SubscriptionParseFailed: "SUBSCRIPTION_PARSE_FAILED",
	SubscriptionNotExist: "SUBSCRIPTION_NOT_EXIST", SubscriptionNotLatest: "SUBSCRIPTION_NOT_LATEST",
	SubscriptionGroupNotExist: "SUBSCRIPTION_GROUP_NOT_EXIST", InvalidParameter: "INVALID_PARAMETER",
	TransactionShouldCommit: "TRANSACTION_SHOULD_COMMIT", TransactionShouldRollback: "TRANSACTION_SHOULD_ROLLBACK",
	TransactionStateUnknow: "TRANSACTION_STATE_UNKNOW", TransactionStateGroupWrong: "TRANSACTION_STATE_GROUP_WRONG",
	ConsumerNotOnline: "CONSUMER_NOT_ONLINE", ConsumeMsgTimeout: "CONSUME_MSG_TIMEOUT", NoMessage: "NO_MESSAGE",
	FlowControl: "FLOW_CONTROL", IllegalOperation: "ILLEGAL_OPERATION",
}

// String names the response code as RocketMQ does.
func (c ResponseCode) String() string {
	if n, ok := responseNames[c]; ok {
		return n
	}
	return "ResponseCode(" + strconv.Itoa(int(c)) + ")"
}

// Retryable reports whether a send that got this code may be retried on
// another broker: the broker could not take the message now, but another one
// (or the same one later) may. It mirrors what RocketMQ producers retry on.
func (c ResponseCode) Retryable() bool {
	switch c {
	case SystemError, SystemBusy, ServiceNotAvailable, NoPermission, TopicNotExist, FlowControl,
		SlaveNotAvailable, FlushSlaveTimeout:
		// The replica codes: the group could not keep a second copy, so
		// the message is not acknowledged; another group may take it.
		return true
	}
	return false
}

// SendSucceeded reports whether a send response code acknowledges the
// message. RocketMQ also counts the replica codes (FLUSH_SLAVE_TIMEOUT,
// SLAVE_NOT_AVAILABLE) as stored; zonemq does not, since such a message
// may exist on one copy only: the sender retries it on another broker.
func (c ResponseCode) SendSucceeded() bool {
	switch c {
	case Success, FlushDiskTimeout:
		return true
	}
	return false
}

// Error is a RocketMQ error response: a code and the remark the peer sent.
type Error struct {
	Code   ResponseCode
	Remark string
}

func (e *Error) Error() string {
	if e.Remark == "" {
		return e.Code.String()
	}
	return e.Code.String() + ": " + e.Remark
}

// Retryable reports whether the request may succeed elsewhere.
func (e *Error) Retryable() bool { return e.Code.Retryable() }
