package remoting

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"math"
	"runtime/metrics"
	"strings"
	"testing"

	"github.com/zonemq/zonemq/internal/testutil"
)

// sendMessageExt is what a SEND_MESSAGE from rocketmq-client-go carries.
func sendMessageExt() map[string]string {
	return map[string]string{
		"producerGroup": "pg", "topic": "TopicTest", "defaultTopic": "TBW102", "defaultTopicQueueNums": "4",
		"queueId": "3", "sysFlag": "0", "bornTimestamp": "1796009302583", "flag": "0",
		"properties":     "TAGS\x01TagA\x02KEYS\x01k1 k2\x02UNIQ_KEY\x01C00002022C180000000096172ff00001\x02",
		"reconsumeTimes": "0", "unitMode": "false", "maxReconsumeTimes": "0", "batch": "false", "bname": "broker-a",
	}
}

// roundTripCases are commands both encodings must carry unchanged.
func roundTripCases() map[string]*Command {
	return map[string]*Command{
		"all fields": {
			Code: 10, Language: "GO", Version: 317, Opaque: 7, Flag: 0, Remark: "remark",
			ExtFields: sendMessageExt(), Body: []byte("hello body"),
		},
		"response": {
			Code: 17, Language: "JAVA", Version: 479, Opaque: math.MaxInt32, Flag: FlagResponse,
			Remark: "No topic route info in name server for the topic: T", ExtFields: map[string]string{"offset": "42"},
		},
		"oneway": {Code: 15, Language: "GO", Version: 1, Opaque: 1, Flag: FlagOneway},
		"nil ext, no body, no remark": {
			Code: 105, Language: "GO", Version: 317, Opaque: -5,
		},
		"empty ext map": {
			Code: 34, Language: "GO", Version: 317, Opaque: 2, ExtFields: map[string]string{}, Body: []byte(`{"clientID":"a@1"}`),
		},
		"empty ext values and keys": {
			Code: 34, Language: "GO", Version: 317, Opaque: 3, ExtFields: map[string]string{"": "", "k": ""},
		},
		"unicode and control characters": {
			Code: 9001, Language: "GO", Version: 479, Opaque: 99, Flag: FlagResponse,
			Remark: "中文 ✓ \U0001F600 \x00\x01\x02\x1f \t\n\r \"quoted\" back\\slash \x7f \u2028",
			ExtFields: map[string]string{
				"properties": "A\x01b\x02C\x01\x02", "ключ": "значение", "ctl": "\x00\x1b[0m", "quote\"key": "<&>",
			},
		},
		"binary body": {
			Code: 11, Language: "GO", Version: 317, Opaque: 12, Flag: FlagResponse,
			ExtFields: map[string]string{"nextBeginOffset": "1"}, Body: []byte{0, 1, 2, 0xff, 0xfe, '{', '"'},
		},
		"negative code": {Code: -1, Language: "CPP", Version: -2, Opaque: math.MinInt32, Flag: -1},
	}
}

func TestCodecRoundTrip(t *testing.T) {
	for _, typ := range []SerializeType{SerializeJSON, SerializeRocketMQ} {
		cases := roundTripCases()
		for _, name := range sortedNames(cases) {
			t.Run(typ.String()+"/"+name, func(t *testing.T) {
				cmd := cases[name]
				cmd.Serialize = typ
				frame := AppendFrame(nil, cmd)
				got, err := DecodeWholeFrame(frame)
				testutil.NoError(t, err, "decode")
				testutil.NoError(t, equalCommand(got, cmd))

				// The same through ReadFrame on a stream, as the read loop sees it.
				got, err = ReadFrame(bufio.NewReader(bytes.NewReader(frame)), DefaultMaxFrameSize)
				testutil.NoError(t, err, "ReadFrame")
				testutil.NoError(t, equalCommand(got, cmd))
			})
		}
	}
}

func TestCodecAppendFrameKeepsPrefix(t *testing.T) {
	cmd := &Command{Code: 10, Language: "GO", Version: 317, Opaque: 1, ExtFields: sendMessageExt(), Body: []byte("x")}
	prefix := []byte("prefix")
	b := AppendFrame(append([]byte(nil), prefix...), cmd)
	testutil.True(t, bytes.HasPrefix(b, prefix), "prefix kept")
	got, err := DecodeWholeFrame(b[len(prefix):])
	testutil.NoError(t, err)
	testutil.NoError(t, equalCommand(got, cmd))
	testutil.True(t, bytes.Equal(b[len(prefix):], EncodeFrame(cmd)), "EncodeFrame equals AppendFrame")
}

func TestCodecEmptyLanguageIsGO(t *testing.T) {
	for _, typ := range []SerializeType{SerializeJSON, SerializeRocketMQ} {
		got, err := DecodeWholeFrame(EncodeFrame(&Command{Code: 1, Serialize: typ}))
		testutil.NoError(t, err)
		testutil.Equal(t, got.Language, Language, typ)
	}
}

func TestCodecBinaryLanguages(t *testing.T) {
	for i, name := range languageCodes {
		got, err := DecodeWholeFrame(EncodeFrame(&Command{Code: 1, Language: name, Serialize: SerializeRocketMQ}))
		testutil.NoError(t, err)
		testutil.Equal(t, got.Language, name)
		testutil.Equal(t, languageCode(name), byte(i))
	}
	// Names the binary header cannot carry become OTHER, numbers are taken
	// as codes.
	for in, want := range map[string]string{"KOTLIN": "OTHER", "9": "GO", "200": "OTHER"} {
		got, err := DecodeWholeFrame(EncodeFrame(&Command{Code: 1, Language: in, Serialize: SerializeRocketMQ}))
		testutil.NoError(t, err)
		testutil.Equal(t, got.Language, want, in)
	}
}

// JSON cannot carry invalid UTF-8; the encoder substitutes U+FFFD like
// encoding/json. The binary header carries the bytes as they are.
func TestCodecInvalidUTF8(t *testing.T) {
	bad := "ok\xff\xfeend"
	cmd := &Command{Code: 1, Language: "GO", Remark: bad, ExtFields: map[string]string{"k": bad}}
	got, err := DecodeWholeFrame(EncodeFrame(cmd))
	testutil.NoError(t, err)
	testutil.Equal(t, got.Remark, "ok\uFFFD\uFFFDend")
	testutil.Equal(t, got.ExtFields["k"], "ok\uFFFD\uFFFDend")

	cmd.Serialize = SerializeRocketMQ
	got, err = DecodeWholeFrame(EncodeFrame(cmd))
	testutil.NoError(t, err)
	testutil.Equal(t, got.Remark, bad)
	testutil.Equal(t, got.ExtFields["k"], bad)
}

// The JSON we write must satisfy the strictest reader we know: the Go
// client's struct (int16 code and version, map[string]string ext).
func TestCodecJSONHeaderIsStrictJSON(t *testing.T) {
	cmd := roundTripCases()["unicode and control characters"]
	cmd.Code = 17
	frame := EncodeFrame(cmd)
	hl := binary.BigEndian.Uint32(frame[4:]) & 0xFFFFFF
	header := frame[8 : 8+hl]
	testutil.True(t, json.Valid(header), "valid JSON")
	testutil.True(t, !bytes.ContainsAny(header, "\n\r\t\x00\x01\x02"), "no raw control characters in the header")
	var strict struct {
		Code      int16             `json:"code"`
		Language  string            `json:"language"`
		Version   int16             `json:"version"`
		Opaque    int32             `json:"opaque"`
		Flag      int32             `json:"flag"`
		Remark    string            `json:"remark"`
		ExtFields map[string]string `json:"extFields"`
	}
	dec := json.NewDecoder(bytes.NewReader(header))
	testutil.NoError(t, dec.Decode(&strict))
	testutil.Equal(t, strict.Remark, cmd.Remark)
	testutil.Equal(t, strict.ExtFields["properties"], cmd.ExtFields["properties"])
	testutil.Equal(t, strict.Language, "GO")
}

// responseExtValues decodes the extFields of a JSON frame without any
// leniency, so a number or boolean shows up as such.
func responseExtValues(t *testing.T, frame []byte) map[string]any {
	t.Helper()
	hl := binary.BigEndian.Uint32(frame[4:]) & 0xFFFFFF
	var h struct {
		ExtFields map[string]any `json:"extFields"`
	}
	testutil.NoError(t, json.Unmarshal(frame[8:8+hl], &h))
	return h.ExtFields
}

func TestCodecResponseExtFieldsAreStrings(t *testing.T) {
	// A request that arrived with numbers and booleans as ext values...
	req, err := DecodeWholeFrame(jsonFrame(`{"code":14,"opaque":9,"extFields":{"queueId":3,"unitMode":true,"offset":-1.5e3}}`, nil))
	testutil.NoError(t, err)
	// ...echoed in the response comes out with JSON strings only.
	resp := NewResponse(req, 0, "")
	for k, v := range req.ExtFields {
		resp.SetExt(k, v)
	}
	resp.SetExt("empty", "")
	vals := responseExtValues(t, EncodeFrame(resp))
	testutil.Equal(t, len(vals), 4)
	for k, v := range vals {
		if _, ok := v.(string); !ok {
			t.Errorf("ext %s=%v is %T, not a JSON string", k, v, v)
		}
	}
	testutil.Equal(t, vals["queueId"].(string), "3")
	testutil.Equal(t, vals["unitMode"].(string), "true")
	testutil.Equal(t, vals["offset"].(string), "-1.5e3")
}

func TestCodecLenientJSON(t *testing.T) {
	cases := []struct {
		name   string
		header string
		check  func(t *testing.T, c *Command)
	}{
		{"numbers and booleans as ext values", `{"code":10,"extFields":{"queueId":3,"batch":false,"unitMode":true,"ratio":1.5,"gone":null}}`,
			func(t *testing.T, c *Command) {
				testutil.Equal(t, c.Ext("queueId"), "3")
				testutil.Equal(t, c.Ext("batch"), "false")
				testutil.Equal(t, c.Ext("unitMode"), "true")
				testutil.Equal(t, c.Ext("ratio"), "1.5")
				_, ok := c.ExtFields["gone"]
				testutil.True(t, !ok, "null ext value dropped")
			}},
		{"language as a number", `{"code":10,"language":9,"version":317}`,
			func(t *testing.T, c *Command) { testutil.Equal(t, c.Language, "9") }},
		{"code and opaque as string numbers", `{"code":"105","opaque":"77","flag":"1","version":"401"}`,
			func(t *testing.T, c *Command) {
				testutil.Equal(t, c.Code, int32(105))
				testutil.Equal(t, c.Opaque, int32(77))
				testutil.Equal(t, c.Flag, int32(1))
				testutil.Equal(t, c.Version, int32(401))
			}},
		{"unknown keys", `{"code":0,"serializeTypeCurrentRPC":"JSON","extra":{"a":[1,{"b":null}]},"flag":1,"opaque":3}`,
			func(t *testing.T, c *Command) {
				testutil.Equal(t, c.Code, int32(0))
				testutil.True(t, c.IsResponse(), "response flag")
			}},
		{"null remark and extFields", `{"code":1,"remark":null,"extFields":null,"language":null}`,
			func(t *testing.T, c *Command) {
				testutil.Equal(t, c.Remark, "")
				testutil.True(t, c.ExtFields == nil, "nil ext")
			}},
		{"empty object", `{}`,
			func(t *testing.T, c *Command) { testutil.Equal(t, c.Code, int32(0)) }},
		{"fastjson response", `{"code":0,"extFields":{"offset":"5"},"flag":1,"language":"JAVA","opaque":1,"serializeTypeCurrentRPC":"JSON","version":479}`,
			func(t *testing.T, c *Command) {
				testutil.Equal(t, c.Language, "JAVA")
				testutil.Equal(t, c.Ext("offset"), "5")
				testutil.Equal(t, c.Version, int32(479))
			}},
		{"escaped strings", `{"code":1,"remark":"a\u0001b\"c\\d\ud83d\ude00","extFields":{"p":"K\u0001V\u0002"}}`,
			func(t *testing.T, c *Command) {
				testutil.Equal(t, c.Remark, "a\x01b\"c\\d\U0001F600")
				testutil.Equal(t, c.Ext("p"), "K\x01V\x02")
			}},
		{"whitespace", " {\n\t\"code\" : 12 ,\r\n \"extFields\" : { \"a\" : \"b\" } }\n",
			func(t *testing.T, c *Command) {
				testutil.Equal(t, c.Code, int32(12))
				testutil.Equal(t, c.Ext("a"), "b")
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := DecodeWholeFrame(jsonFrame(tc.header, []byte("b")))
			testutil.NoError(t, err)
			testutil.Equal(t, string(c.Body), "b")
			testutil.Equal(t, c.Serialize, SerializeJSON)
			tc.check(t, c)
		})
	}
}

func TestCodecRejectsBadJSONHeaders(t *testing.T) {
	for name, header := range map[string]string{
		"not JSON":             `{"code":`,
		"empty header":         ``,
		"array":                `[1,2]`,
		"object ext value":     `{"code":1,"extFields":{"a":{"b":"c"}}}`,
		"array ext value":      `{"code":1,"extFields":{"a":[1]}}`,
		"fractional code":      `{"code":1.5}`,
		"code beyond int32":    `{"code":2147483648}`,
		"opaque beyond int32":  `{"opaque":-2147483649}`,
		"code not a number":    `{"code":"ten"}`,
		"code a boolean":       `{"code":true}`,
		"extFields not object": `{"code":1,"extFields":"a=b"}`,
		"trailing garbage":     `{"code":1}}`,
	} {
		t.Run(name, func(t *testing.T) {
			_, err := DecodeWholeFrame(jsonFrame(header, nil))
			var fe *FrameError
			if !errors.As(err, &fe) {
				t.Fatalf("got %v, want a FrameError", err)
			}
		})
	}
}

// binaryHeaderFieldCuts are the places a binary header can end early: inside
// every fixed field, inside the remark, the ext length, a key length, a key,
// a value length and a value.
func binaryHeaderFieldCuts() (header []byte, cuts map[string]int) {
	cmd := &Command{Code: 10, Language: "GO", Version: 317, Opaque: 5, Remark: "remark-text", ExtFields: map[string]string{"kk": "vvv"}}
	header = appendBinaryHeader(nil, cmd)
	// code 0-2, language 2, version 3-5, opaque 5-9, flag 9-13, remark
	// length 13-17, remark 17-28, ext length 28-32, key length 32-34, key
	// 34-36, value length 36-40, value 40-43.
	cuts = map[string]int{
		"code": 1, "language": 2, "version": 4, "opaque": 7, "flag": 11, "remark length": 15,
		"remark": 25, "ext length": 30, "key length": 33, "key": 35, "value length": 38, "value": 42,
	}
	return header, cuts
}

func TestCodecBinaryHeaderTruncated(t *testing.T) {
	header, cuts := binaryHeaderFieldCuts()
	testutil.Equal(t, len(header), 43)
	if _, err := decodeBinaryHeader(header, false); err != nil {
		t.Fatalf("the whole header must decode: %v", err)
	}
	for field, cut := range cuts {
		t.Run(field, func(t *testing.T) {
			// A self-consistent frame whose header length says cut.
			_, err := DecodeWholeFrame(frameWithHeader(SerializeRocketMQ, header[:cut], nil))
			var fe *FrameError
			if !errors.As(err, &fe) {
				t.Fatalf("cut at %d: got %v, want a FrameError", cut, err)
			}
		})
	}
	// The length fields promise the whole header, so every shorter cut fails.
	for cut := 0; cut < len(header); cut++ {
		if _, err := DecodeWholeFrame(frameWithHeader(SerializeRocketMQ, header[:cut], nil)); err == nil {
			t.Errorf("cut at %d decoded", cut)
		}
	}
}

func TestCodecBinaryLengthsOutOfRange(t *testing.T) {
	base := appendBinaryHeader(nil, &Command{Code: 1, Remark: "r", ExtFields: map[string]string{"k": "v"}})
	for name, mutate := range map[string]func(h []byte){
		"negative remark length": func(h []byte) { binary.BigEndian.PutUint32(h[13:], 0xFFFFFFFF) },
		"huge remark length":     func(h []byte) { binary.BigEndian.PutUint32(h[13:], 0x7FFFFFFF) },
		"negative ext length":    func(h []byte) { binary.BigEndian.PutUint32(h[18:], 0x80000000) },
		"huge ext length":        func(h []byte) { binary.BigEndian.PutUint32(h[18:], 1000) },
		"huge key length":        func(h []byte) { binary.BigEndian.PutUint16(h[22:], 0xFFFF) },
		"negative value length":  func(h []byte) { binary.BigEndian.PutUint32(h[25:], 0xFFFFFFFF) },
	} {
		t.Run(name, func(t *testing.T) {
			h := append([]byte(nil), base...)
			mutate(h)
			_, err := decodeBinaryHeader(h, false)
			var fe *FrameError
			if !errors.As(err, &fe) {
				t.Fatalf("got %v, want a FrameError", err)
			}
		})
	}
}

func TestCodecFrameErrors(t *testing.T) {
	good := EncodeFrame(&Command{Code: 1})
	cases := map[string]struct {
		frame []byte
		want  string
	}{
		"length below 4":             {[]byte{0, 0, 0, 3, 0, 0, 0}, "below 4"},
		"negative length":            {[]byte{0xff, 0xff, 0xff, 0xff}, "below 4"},
		"header length beyond frame": {[]byte{0, 0, 0, 6, 0, 0, 0, 9, '{', '}'}, "exceeds frame length"},
		"unknown serialize type":     {frameWithHeader(2, []byte("{}"), nil), "unknown serialize type 2"},
		"serialize type 0xff":        {frameWithHeader(0xff, []byte("{}"), nil), "unknown serialize type 255"},
		"frame error wraps json":     {jsonFrame("nope", nil), "invalid JSON header"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := ReadFrame(bufio.NewReader(bytes.NewReader(tc.frame)), DefaultMaxFrameSize)
			var fe *FrameError
			if !errors.As(err, &fe) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want a FrameError containing %q", err, tc.want)
			}
		})
	}
	// DecodeWholeFrame insists that the length field matches.
	_, err := DecodeWholeFrame(append(append([]byte(nil), good...), 0))
	testutil.True(t, err != nil, "trailing byte rejected")
	_, err = DecodeWholeFrame(good[:3])
	testutil.True(t, err != nil, "3 bytes rejected")
	// A stream that ends inside a frame is an unexpected EOF, at a frame
	// boundary a plain EOF.
	_, err = ReadFrame(bufio.NewReader(bytes.NewReader(good[:len(good)-1])), DefaultMaxFrameSize)
	testutil.ErrorIs(t, err, io.ErrUnexpectedEOF)
	_, err = ReadFrame(bufio.NewReader(bytes.NewReader(good[:2])), DefaultMaxFrameSize)
	testutil.ErrorIs(t, err, io.ErrUnexpectedEOF)
	_, err = ReadFrame(bufio.NewReader(bytes.NewReader(nil)), DefaultMaxFrameSize)
	testutil.ErrorIs(t, err, io.EOF)
}

// allocatedDuring returns about how many bytes were allocated on the heap
// while fn ran (runtime/metrics, which unlike ReadMemStats does not stop the
// world, so the fuzz targets can call it on every input). Small allocations
// are counted per span, so the figure is coarse; it exists to catch an
// allocation sized by a length field.
func allocatedDuring(fn func()) uint64 {
	sample := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(sample)
	before := sample[0].Value.Uint64()
	fn()
	metrics.Read(sample)
	return sample[0].Value.Uint64() - before
}

// An oversize length field is refused before anything of that size is
// allocated, whatever the limit.
func TestCodecOversizeFrameNotAllocated(t *testing.T) {
	for _, tc := range []struct {
		length uint32
		limit  int
	}{
		{DefaultMaxFrameSize + 1, DefaultMaxFrameSize},
		{0x7FFFFFFF, DefaultMaxFrameSize},
		{1 << 20, 1 << 16},
	} {
		frame := binary.BigEndian.AppendUint32(nil, tc.length)
		frame = append(frame, 0, 0, 0, 2, '{', '}')
		r := bufio.NewReader(bytes.NewReader(frame))
		var err error
		n := allocatedDuring(func() { _, err = ReadFrame(r, tc.limit) })
		testutil.ErrorIs(t, err, ErrFrameTooLarge)
		if n > 64<<10 {
			t.Errorf("length %d, limit %d: allocated %d bytes to refuse it", tc.length, tc.limit, n)
		}
	}
}

// A frame exactly at the limit is accepted; one byte more is not.
func TestCodecFrameAtLimit(t *testing.T) {
	const limit = 1 << 12
	cmd := &Command{Code: 1, Language: "GO"}
	headerOnly := EncodeFrame(cmd)
	cmd.Body = bytes.Repeat([]byte{'x'}, limit-(len(headerOnly)-4))
	frame := EncodeFrame(cmd)
	testutil.Equal(t, len(frame)-4, limit)
	_, err := ReadFrame(bufio.NewReader(bytes.NewReader(frame)), limit)
	testutil.NoError(t, err, "at the limit")
	cmd.Body = append(cmd.Body, 'y')
	_, err = ReadFrame(bufio.NewReader(bytes.NewReader(EncodeFrame(cmd))), limit)
	testutil.ErrorIs(t, err, ErrFrameTooLarge)
}

func TestCodecSerializeTypeString(t *testing.T) {
	testutil.Equal(t, SerializeJSON.String(), "JSON")
	testutil.Equal(t, SerializeRocketMQ.String(), "ROCKETMQ")
	testutil.Equal(t, SerializeType(7).String(), "SerializeType(7)")
}

func TestCodecCommandHelpers(t *testing.T) {
	req := NewRequest(105, nil, nil)
	testutil.Equal(t, req.Language, Language)
	testutil.Equal(t, req.Version, Version)
	testutil.Equal(t, req.Ext("missing"), "")
	req.SetExt("topic", "T")
	testutil.Equal(t, req.Ext("topic"), "T")
	req.Opaque, req.Serialize = 5, SerializeRocketMQ
	resp := NewResponse(req, 17, "no route")
	testutil.True(t, resp.IsResponse(), "response")
	testutil.Equal(t, resp.Opaque, int32(5))
	testutil.Equal(t, resp.Serialize, SerializeRocketMQ)
	testutil.True(t, (&Command{Flag: FlagOneway}).IsOneway(), "oneway")
	s := (&Command{Code: 10, Body: []byte("secret body")}).String()
	testutil.True(t, strings.Contains(s, "body=11B") && !strings.Contains(s, "secret"), "String hides the body: "+s)
}
