package protocol

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
)

// EncodeCompressedRegisterBody writes a registration in RocketMQ's
// compressed form (RegisterBrokerBody.encode(true)): a zlib stream of
// int32-length-prefixed items — the data version JSON, the topic count, one
// "name read write perm filterType [attributesJSON]" line per topic, the
// filter-server list JSON. A broker with many or long-named topics uses it
// when the JSON body grows large: 46 k topics of 121 characters made the
// JSON registration exceed the 16 MiB frame limit. Like RocketMQ's, the
// line leaves out a topic's sysflag and order flag.
func EncodeCompressedRegisterBody(w TopicConfigSerializeWrapper, filterServers []string) []byte {
	var raw bytes.Buffer
	var n [4]byte
	item := func(b []byte) {
		binary.BigEndian.PutUint32(n[:], uint32(len(b)))
		raw.Write(n[:])
		raw.Write(b)
	}
	dv, _ := json.Marshal(w.DataVersion)
	item(dv)
	binary.BigEndian.PutUint32(n[:], uint32(len(w.TopicConfigTable)))
	raw.Write(n[:])
	names := make([]string, 0, len(w.TopicConfigTable))
	for name := range w.TopicConfigTable {
		names = append(names, name)
	}
	slices.Sort(names)
	var line strings.Builder
	for _, name := range names {
		tc := w.TopicConfigTable[name]
		line.Reset()
		line.WriteString(name)
		for _, v := range []int{tc.ReadQueueNums, tc.WriteQueueNums, tc.Perm} {
			line.WriteByte(' ')
			line.WriteString(strconv.Itoa(v))
		}
		line.WriteByte(' ')
		line.WriteString(orDefault(tc.TopicFilterType, "SINGLE_TAG"))
		if len(tc.Attributes) > 0 {
			a, _ := json.Marshal(tc.Attributes)
			line.WriteByte(' ')
			line.Write(a)
		}
		item([]byte(line.String()))
	}
	if filterServers == nil {
		filterServers = []string{}
	}
	fs, _ := json.Marshal(filterServers)
	item(fs)
	var out bytes.Buffer
	zw, _ := zlib.NewWriterLevel(&out, zlib.BestSpeed)
	zw.Write(raw.Bytes())
	zw.Close()
	return out.Bytes()
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
