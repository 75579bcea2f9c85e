package remoting

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"
)

// goldenJSONHeaders returns the JSON headers of the golden frames.
func goldenJSONHeaders(t testing.TB) map[string][]byte {
	t.Helper()
	out := make(map[string][]byte)
	for name, raw := range readGoldenFrames(t) {
		word := binary.BigEndian.Uint32(raw[4:])
		if SerializeType(word>>24) != SerializeJSON {
			continue
		}
		out[name] = raw[8 : 8+word&0xFFFFFF]
	}
	return out
}

// fastPathHeaders are headers the fast decoder must decode itself (not hand
// to encoding/json), each exercising one lenient or unusual form.
var fastPathHeaders = []string{
	`{}`,
	" \t\r\n{ \"code\" : 1 , \"opaque\":-7 }\n\t ",
	`{"code":"12","version":"-0","opaque":2147483647,"flag":-2147483648}`,
	`{"code":null,"remark":null,"extFields":null,"language":"JAVA"}`,
	`{"language":9,"extFields":{"n":1.5e+3,"b":true,"f":false,"z":null,"s":"x"}}`,
	`{"language":-1.25E-2}`,
	`{"extFields":{}}`,
	`{"extFields":{"a":null}}`,
	`{"extFields":{"a":"1","a":"2","b":"3","b":null}}`,
	`{"extFields":{"\u0061":"1","a":"2"}}`,
	`{"remark":"q\"b\\s\/b\bf\fn\nr\rt\t\u00e9\u4e2d\ud83d\ude00"}`,
	`{"remark":"lone \ud800 high, lone \udc00 low, \ud800\u0041 broken pair, \ud800\ud800\udc00"}`,
	"{\"remark\":\"raw \xe4\xb8\xad and bad \xff\xfe bytes and \xed\xa0\x80\"}",
	"{\"extFields\":{\"k\xff\":\"v\xc3\"}}",
	`{"unknown":{"a":[1,{"b":[]},"\"}"],"c":{}},"x":[],"y":[[[]]],"z":"]}","w":-0.0e0,"v":true,"u":null}`,
	`{"codes":1,"Extfield":2,"remarks":{"code":"x"}}`,
	`{"code":10,"language":"GO","version":317,"opaque":12345,"flag":0,"extFields":{"topic":"T"},"serializeTypeCurrentRPC":"JSON"}`,
}

// slowPathHeaders are headers the fast decoder must refuse, because only
// encoding/json can say what they mean (or that they are wrong).
var slowPathHeaders = []string{
	``, ` `, `null`, `[]`, `1`, `"x"`, `{`, `{"code":1`, `{"code":1}x`, `{"code":1} {}`, `{"code":1,}`,
	`{"code":01}`, `{"code":1.0}`, `{"code":1e2}`, `{"code":"01"}`, `{"code":"-"}`, `{"code":"-01"}`, `{"code":" 1"}`,
	`{"code":""}`, `{"code":"\u0031"}`, `{"code":2147483648}`, `{"code":-2147483649}`, `{"code":99999999999}`,
	`{"code":true}`, `{"code":1,"code":2}`, `{"Code":1}`, `{"CODE":1}`, `{"ver\u017fion":1}`, `{"c\u006fde":1}`,
	`{"language":null}`, `{"language":true}`, `{"language":{"a":1}}`, `{"remark":1}`, `{"extFields":[]}`,
	`{"extFields":"a"}`, `{"extFields":{"a":{}}}`, `{"extFields":{"a":[1]}}`, `{"extFields":{"a":1},"extFields":{"b":2}}`,
	`{"remark":"a` + "\x01" + `"}`, `{"remark":"\x"}`, `{"remark":"\u12"}`, `{"x":[1,]}`, `{"x":{"a"}}`, `{"x":tru}`,
	`{"x":-}`, `{"x":1.}`, `{"x":1e}`, `{"x":.5}`, `{"x":+1}`, `{"x":[}`, `{"x":{]}`,
	`{"x":` + strings.Repeat("[", jsonMaxDepth+1) + strings.Repeat("]", jsonMaxDepth+1) + `}`,
}

// sameJSONResult compares a fast-path command with encoding/json's, down to
// whether ExtFields is nil.
func sameJSONResult(fast, std *Command) error {
	if err := equalCommand(fast, std); err != nil {
		return err
	}
	if (fast.ExtFields == nil) != (std.ExtFields == nil) {
		return errors.New("ext fields nil on one side only")
	}
	return nil
}

// checkFastMatchesStd fails t when the fast decoder succeeds where
// encoding/json does not, or with a different command, or fails with an
// error other than errJSONSlowPath. It reports whether the fast path took
// the header.
func checkFastMatchesStd(t *testing.T, header []byte) bool {
	t.Helper()
	fast, ferr := decodeJSONHeaderFast(header)
	std, serr := decodeJSONHeaderStd(header)
	if ferr != nil {
		if ferr != errJSONSlowPath {
			t.Fatalf("fast path on %q: %v", header, ferr)
		}
		return false
	}
	if serr != nil {
		t.Fatalf("fast path accepted %q, encoding/json says %v", header, serr)
	}
	if err := sameJSONResult(fast, std); err != nil {
		t.Fatalf("fast path on %q: %v", header, err)
	}
	return true
}

func TestCodecJSONHeaderFastPathTakesGolden(t *testing.T) {
	for name, h := range goldenJSONHeaders(t) {
		if !checkFastMatchesStd(t, h) {
			t.Errorf("golden %s went to the slow path", name)
		}
	}
	if !checkFastMatchesStd(t, appendJSONHeader(nil, benchSendCommand())) {
		t.Error("the benchmark's header went to the slow path")
	}
}

func TestCodecJSONHeaderFastPathEdgeCases(t *testing.T) {
	for _, h := range fastPathHeaders {
		if !checkFastMatchesStd(t, []byte(h)) {
			t.Errorf("%q went to the slow path", h)
		}
	}
	for _, h := range slowPathHeaders {
		if checkFastMatchesStd(t, []byte(h)) {
			t.Errorf("%q took the fast path", h)
		}
	}
}

func TestCodecJSONHeaderDecodeKeepsStdErrors(t *testing.T) {
	for _, h := range slowPathHeaders {
		_, got := decodeJSONHeader([]byte(h))
		_, want := decodeJSONHeaderStd([]byte(h))
		if errorClass(got) != errorClass(want) {
			t.Errorf("%q: error %v, encoding/json path %v", h, got, want)
		}
	}
}

// TestJSONHeaderLargeHeaderCopiesStrings checks that above the shared-copy
// limit the decoded strings do not alias one another's backing.
func TestCodecJSONHeaderLargeHeaderCopiesStrings(t *testing.T) {
	h := `{"remark":"` + strings.Repeat("r", jsonSharedBackingMax) + `","extFields":{"a":"b"}}`
	if !checkFastMatchesStd(t, []byte(h)) {
		t.Fatal("large header went to the slow path")
	}
}

func TestCodecJSONHeaderFastPathAllocs(t *testing.T) {
	header := appendJSONHeader(nil, benchSendCommand())
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := decodeJSONHeaderFast(header); err != nil {
			t.Fatal(err)
		}
	})
	// The command, the header's one string copy and the ext map (a few
	// allocations for 14 fields), where encoding/json needs about a hundred.
	if allocs > 8 {
		t.Errorf("decoding the send header allocates %v times", allocs)
	}
}

// FuzzJSONHeaderFastMatchesStd is the proof the fast decoder may replace
// encoding/json: whenever it decodes a header, encoding/json decodes it to
// the same command.
func FuzzJSONHeaderFastMatchesStd(f *testing.F) {
	for _, h := range goldenJSONHeaders(f) {
		f.Add(h)
	}
	f.Add(appendJSONHeader(nil, benchSendCommand()))
	for _, h := range fastPathHeaders {
		f.Add([]byte(h))
	}
	for _, h := range slowPathHeaders {
		f.Add([]byte(h))
	}
	f.Fuzz(func(t *testing.T, header []byte) {
		checkFastMatchesStd(t, header)
		got, gerr := decodeJSONHeader(header)
		want, werr := decodeJSONHeaderStd(header)
		if errorClass(gerr) != errorClass(werr) {
			t.Fatalf("%q: error %v, encoding/json path %v", header, gerr, werr)
		}
		if gerr == nil {
			if err := sameJSONResult(got, want); err != nil {
				t.Fatalf("%q: %v", header, err)
			}
		}
	})
}
