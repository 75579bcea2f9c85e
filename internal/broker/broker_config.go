package broker

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
)

// runtimeConfigKeys are the broker.conf keys UPDATE_BROKER_CONFIG may change
// while the broker runs; everything else needs a restart (and is refused,
// rather than accepted and silently ignored).
var runtimeConfigKeys = map[string]func(s *Server, v string) error{
	// diskMaxUsedSpaceRatio is a percentage in RocketMQ's broker.conf.
	"diskMaxUsedSpaceRatio": func(s *Server, v string) error {
		pct, err := strconv.ParseFloat(v, 64)
		if err != nil || math.IsNaN(pct) || pct < 1 || pct > 99 {
			return fmt.Errorf("diskMaxUsedSpaceRatio must be a percentage within 1..99, got %q", v)
		}
		s.store.SetDiskMaxUsedRatio(pct / 100)
		s.logger.Warn("disk guard changed at run time", "diskMaxUsedSpaceRatio", pct)
		return nil
	},
}

// handleGetBrokerConfig serves GET_BROKER_CONFIG (`mqadmin getBrokerConfig`):
// the broker's settings as broker.conf key=value lines, RocketMQ's names
// where one exists.
func (s *Server) handleGetBrokerConfig(ctx context.Context, c *remoting.Conn, req *remoting.Command) *remoting.Command {
	o := s.opts
	kv := map[string]string{
		"brokerClusterName":       o.Cluster,
		"brokerName":              o.BrokerName,
		"brokerId":                strconv.FormatInt(o.BrokerID, 10),
		"zoneName":                o.IDC,
		"brokerAddr":              s.addr,
		"namesrvAddr":             strings.Join(o.NamesrvAddrs, ";"),
		"storePathRootDir":        o.DataDir,
		"flushDiskType":           o.Flush.String(),
		"autoCreateTopicEnable":   strconv.FormatBool(o.AutoCreateTopic),
		"defaultTopicQueueNums":   strconv.Itoa(o.DefaultTopicQueueNums),
		"maxMessageSize":          strconv.Itoa(o.MaxMessageSize),
		"fileReservedTime":        strconv.FormatFloat(o.FileReservedTime.Hours(), 'f', -1, 64),
		"diskMaxUsedSpaceRatio":   strconv.FormatFloat(100*s.store.DiskMaxUsedRatio(), 'f', -1, 64),
		"mappedFileSizeCommitLog": strconv.FormatInt(o.SegmentSize, 10),
		"longPollingMaxMillis":    strconv.FormatInt(o.LongPollingMax.Milliseconds(), 10),
		"channelExpiredTimeout":   strconv.FormatInt(o.ChannelExpiry.Milliseconds(), 10),
		"metricsListen":           o.MetricsListen,
	}
	keys := make([]string, 0, len(kv))
	for k := range kv {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%s\n", k, kv[k])
	}
	return success(req, nil, []byte(b.String()))
}

// handleUpdateBrokerConfig serves UPDATE_BROKER_CONFIG (`mqadmin
// updateBrokerConfig`): a body of key=value lines. Only runtimeConfigKeys
// may change; a request with any other key changes nothing and is refused
// with INVALID_PARAMETER naming the keys that may. The change lasts until
// restart (put it in the config file to keep it).
func (s *Server) handleUpdateBrokerConfig(ctx context.Context, c *remoting.Conn, req *remoting.Command) *remoting.Command {
	updates := map[string]string{}
	for _, line := range strings.Split(string(req.Body), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return errorf(req, protocol.InvalidParameter, "UPDATE_BROKER_CONFIG: %q is not key=value", line)
		}
		updates[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	if len(updates) == 0 {
		return errorf(req, protocol.InvalidParameter, "UPDATE_BROKER_CONFIG: no key=value line in the body")
	}
	changeable := make([]string, 0, len(runtimeConfigKeys))
	for k := range runtimeConfigKeys {
		changeable = append(changeable, k)
	}
	sort.Strings(changeable)
	for k := range updates {
		if runtimeConfigKeys[k] == nil {
			return errorf(req, protocol.InvalidParameter, "broker config %s cannot change at run time (changeable: %s); nothing was changed",
				k, strings.Join(changeable, ", "))
		}
	}
	for k, v := range updates {
		if err := runtimeConfigKeys[k](s, v); err != nil {
			return errorf(req, protocol.InvalidParameter, "%v", err)
		}
	}
	return success(req, nil, nil)
}
