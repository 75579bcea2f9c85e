package broker

import (
	"context"
	"sort"
	"time"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
)

// handleGetTopicFlows serves zonemq's GET_TOPIC_FLOWS: the per-topic (and
// per topic and group) message and byte counters the metrics export, for
// `zonemq admin topic stats`. Reading them takes no lock on the send or pull
// path (they are atomics in sync.Maps).
func (s *Server) handleGetTopicFlows(ctx context.Context, c *remoting.Conn, req *remoting.Command) *remoting.Command {
	only := req.Ext("topic")
	m := s.metrics
	out := protocol.TopicFlows{AtMillis: time.Now().UnixMilli(), StartMillis: s.bootTime.UnixMilli(),
		In: []protocol.TopicFlow{}, Out: []protocol.TopicFlow{}}
	m.in.Range(func(k, v any) bool {
		if topic := k.(string); only == "" || topic == only {
			f := v.(*flowCounters)
			out.In = append(out.In, protocol.TopicFlow{Topic: topic, Messages: f.messages.Load(), Bytes: f.bytes.Load()})
		}
		return true
	})
	m.out.Range(func(k, v any) bool {
		if tg := k.(topicGroup); only == "" || tg.topic == only {
			f := v.(*flowCounters)
			out.Out = append(out.Out, protocol.TopicFlow{Topic: tg.topic, Group: tg.group, Messages: f.messages.Load(), Bytes: f.bytes.Load()})
		}
		return true
	})
	sort.Slice(out.In, func(i, j int) bool { return out.In[i].Topic < out.In[j].Topic })
	sort.Slice(out.Out, func(i, j int) bool {
		if out.Out[i].Topic != out.Out[j].Topic {
			return out.Out[i].Topic < out.Out[j].Topic
		}
		return out.Out[i].Group < out.Out[j].Group
	})
	return successJSON(req, out)
}
