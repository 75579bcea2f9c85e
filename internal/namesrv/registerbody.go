package namesrv

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"strconv"
	"strings"

	"github.com/zonemq/zonemq/internal/protocol"
)

// maxInflatedRegisterBody bounds a compressed REGISTER_BROKER body once
// inflated, so a small frame cannot expand without limit.
const maxInflatedRegisterBody = 64 << 20

// brokerRegistration is a decoded REGISTER_BROKER body.
type brokerRegistration struct {
	hasBody       bool // false: the broker sent no body (liveness only)
	dataVersion   protocol.DataVersion
	topics        map[string]protocol.TopicConfig
	filterServers []string
}

// bodyCRC32 is RocketMQ's body checksum: CRC32 (IEEE) & 0x7FFFFFFF.
func bodyCRC32(body []byte) int32 {
	return int32(crc32.ChecksumIEEE(body) & 0x7FFFFFFF)
}

// decodeRegisterBody parses a REGISTER_BROKER body: a RegisterBrokerBody
// JSON, a bare TopicConfigSerializeWrapper JSON (brokers older than
// RocketMQ 3.0.11), or with compressed set RocketMQ's zlib format.
//
// maxTopics caps the topics it may carry (0: no cap): a compressed body
// says its count before its lines, so an oversized one is refused before
// anything is inflated or kept.
func decodeRegisterBody(body []byte, compressed bool, maxTopics int) (*brokerRegistration, error) {
	if len(body) == 0 {
		return &brokerRegistration{topics: map[string]protocol.TopicConfig{}}, nil
	}
	var reg *brokerRegistration
	var err error
	if compressed {
		reg, err = decodeCompressedRegisterBody(body, maxTopics)
	} else {
		reg, err = decodeJSONRegisterBody(body)
	}
	if err != nil {
		return nil, err
	}
	if maxTopics > 0 && len(reg.topics) > maxTopics {
		return nil, tooManyTopics(len(reg.topics), maxTopics)
	}
	reg.hasBody = true
	for name, tc := range reg.topics {
		if name == "" {
			return nil, fmt.Errorf("a topic config has no name")
		}
		if tc.ReadQueueNums < 0 || tc.WriteQueueNums < 0 {
			return nil, fmt.Errorf("topic %q has a negative queue count", name)
		}
	}
	return reg, nil
}

func decodeJSONRegisterBody(body []byte) (*brokerRegistration, error) {
	// Both shapes are read in one pass: RegisterBrokerBody nests the wrapper,
	// an old broker's bare wrapper has its fields at the top.
	var probe struct {
		Wrapper          *protocol.TopicConfigSerializeWrapper `json:"topicConfigSerializeWrapper"`
		FilterServerList []string                              `json:"filterServerList"`
		TopicConfigTable map[string]protocol.TopicConfig       `json:"topicConfigTable"`
		DataVersion      protocol.DataVersion                  `json:"dataVersion"`
	}
	if err := json.Unmarshal(protocol.QuoteIntegerKeys(body), &probe); err != nil {
		return nil, fmt.Errorf("not a RegisterBrokerBody or TopicConfigSerializeWrapper JSON: %w", err)
	}
	reg := &brokerRegistration{filterServers: probe.FilterServerList}
	if probe.Wrapper != nil {
		reg.dataVersion = probe.Wrapper.DataVersion
		reg.topics = probe.Wrapper.TopicConfigTable
	} else {
		reg.dataVersion = probe.DataVersion
		reg.topics = probe.TopicConfigTable
	}
	reg.topics = namedTopics(reg.topics)
	return reg, nil
}

// namedTopics keys topic configs by their name, taking the table key when a
// config leaves topicName out.
func namedTopics(in map[string]protocol.TopicConfig) map[string]protocol.TopicConfig {
	out := make(map[string]protocol.TopicConfig, len(in))
	for key, tc := range in {
		if tc.TopicName == "" {
			tc.TopicName = key
		}
		out[tc.TopicName] = tc
	}
	return out
}

// decodeCompressedRegisterBody reads RocketMQ's compressed registration
// (RegisterBrokerBody.encode(true)): a zlib stream of int32-length-prefixed
// items — DataVersion JSON; a topic count and one "name read write perm
// filterType [attributesJSON]" line per topic; the filter-server list JSON;
// then (RocketMQ ≥ 5) a count of static-topic mapping JSONs, which zonemq
// reads past.
func decodeCompressedRegisterBody(body []byte, maxTopics int) (*brokerRegistration, error) {
	zr, err := zlib.NewReader(bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("compressed body: %w", err)
	}
	defer zr.Close()
	r := &inflated{r: io.LimitReader(zr, maxInflatedRegisterBody)}

	reg := &brokerRegistration{topics: map[string]protocol.TopicConfig{}}
	if err := json.Unmarshal(r.item("data version"), &reg.dataVersion); r.err == nil && err != nil {
		return nil, fmt.Errorf("compressed body: data version: %w", err)
	}
	count := r.int32("topic count")
	if maxTopics > 0 && int(count) > maxTopics {
		return nil, tooManyTopics(int(count), maxTopics)
	}
	for i := int32(0); i < count && r.err == nil; i++ {
		line := r.item("topic config")
		if r.err != nil {
			break
		}
		tc, err := parseTopicConfigLine(string(line))
		if err != nil {
			return nil, fmt.Errorf("compressed body: %w", err)
		}
		reg.topics[tc.TopicName] = tc
	}
	fs := r.item("filter server list")
	if r.err != nil {
		return nil, fmt.Errorf("compressed body: %w", r.err)
	}
	if len(fs) > 0 {
		if err := json.Unmarshal(fs, &reg.filterServers); err != nil {
			return nil, fmt.Errorf("compressed body: filter server list: %w", err)
		}
	}
	// Brokers before RocketMQ 5 end here; later ones add the mapping count.
	mappings := r.int32("mapping count")
	if errors.Is(r.err, io.EOF) {
		return reg, nil
	}
	for i := int32(0); i < mappings && r.err == nil; i++ {
		r.item("topic queue mapping")
	}
	if r.err != nil {
		return nil, fmt.Errorf("compressed body: %w", r.err)
	}
	return reg, nil
}

// errTooManyTopics wraps a registration refused for its size.
var errTooManyTopics = errors.New("registration too large")

func tooManyTopics(n, limit int) error {
	return fmt.Errorf("%w: it carries %d topics; this name server takes at most %d per broker "+
		"(--max-topics-per-broker; delete unused topics, or spread them over more brokers)", errTooManyTopics, n, limit)
}

// parseTopicConfigLine parses RocketMQ's TopicConfig.encode() text. The
// attributes JSON, if any, is everything after the fifth space, so values
// holding spaces survive (RocketMQ's own split drops them).
func parseTopicConfigLine(s string) (protocol.TopicConfig, error) {
	f := strings.SplitN(s, " ", 6)
	if len(f) < 5 || f[0] == "" {
		return protocol.TopicConfig{}, fmt.Errorf("topic config %q: want \"name read write perm filterType [attributes]\"", s)
	}
	var nums [3]int
	for i := range nums {
		n, err := strconv.Atoi(f[i+1])
		if err != nil || n < 0 {
			return protocol.TopicConfig{}, fmt.Errorf("topic config %q: field %d is not a count", s, i+2)
		}
		nums[i] = n
	}
	tc := protocol.TopicConfig{
		TopicName: f[0], ReadQueueNums: nums[0], WriteQueueNums: nums[1], Perm: nums[2], TopicFilterType: f[4],
	}
	if len(f) == 6 && strings.TrimSpace(f[5]) != "" {
		// Like RocketMQ, bad attributes do not reject the registration.
		_ = json.Unmarshal([]byte(f[5]), &tc.Attributes)
	}
	return tc, nil
}

// inflated reads length-prefixed items from the inflated stream, keeping
// the first error.
type inflated struct {
	r   io.Reader
	err error
}

func (in *inflated) int32(what string) int32 {
	if in.err != nil {
		return 0
	}
	var b [4]byte
	if _, err := io.ReadFull(in.r, b[:]); err != nil {
		if err == io.ErrUnexpectedEOF {
			err = fmt.Errorf("%s: truncated", what)
		}
		in.err = err
		return 0
	}
	v := int32(binary.BigEndian.Uint32(b[:]))
	if v < 0 {
		in.err = fmt.Errorf("%s: negative length %d", what, v)
		return 0
	}
	return v
}

func (in *inflated) item(what string) []byte {
	n := in.int32(what + " length")
	if in.err != nil {
		if in.err == io.EOF {
			in.err = fmt.Errorf("%s: missing", what)
		}
		return nil
	}
	if n > maxInflatedRegisterBody {
		in.err = fmt.Errorf("%s: length %d over the %d-byte limit", what, n, maxInflatedRegisterBody)
		return nil
	}
	// Read through a limit instead of allocating n up front: the length
	// comes from the peer and may be a lie.
	b, err := io.ReadAll(io.LimitReader(in.r, int64(n)))
	if err != nil || len(b) != int(n) {
		in.err = fmt.Errorf("%s: truncated", what)
		return nil
	}
	return b
}
