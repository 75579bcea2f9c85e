package protocol_test

import (
	"encoding/hex"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
	"github.com/zonemq/zonemq/internal/testutil"
)

// headerTypes lists every type in package protocol that implements Header.
// TestHeaderListComplete fails when the package gains one that is missing
// here: add it, and the round trip below covers it.
var headerTypes = []protocol.Header{
	// headers_broker.go
	&protocol.SendMessageRequestHeader{},
	&protocol.SendMessageRequestHeaderV2{},
	&protocol.SendMessageResponseHeader{},
	&protocol.PullMessageRequestHeader{},
	&protocol.PullMessageResponseHeader{},
	&protocol.QueryConsumerOffsetRequestHeader{},
	&protocol.OffsetResponseHeader{},
	&protocol.UpdateConsumerOffsetRequestHeader{},
	&protocol.QueueRequestHeader{},
	&protocol.SearchOffsetRequestHeader{},
	&protocol.ResetOffsetRequestHeader{},
	&protocol.TimestampResponseHeader{},
	&protocol.QueryMessageRequestHeader{},
	&protocol.QueryMessageResponseHeader{},
	&protocol.ViewMessageRequestHeader{},
	&protocol.CreateTopicRequestHeader{},
	&protocol.TopicRequestHeader{},
	&protocol.ConsumerGroupRequestHeader{},
	&protocol.ProducerGroupRequestHeader{},
	&protocol.GetConsumeStatsRequestHeader{},
	&protocol.UnregisterClientRequestHeader{},
	// headers_namesrv.go
	&protocol.RegisterBrokerRequestHeader{},
	&protocol.RegisterBrokerResponseHeader{},
	&protocol.UnregisterBrokerRequestHeader{},
	&protocol.BrokerHeartbeatRequestHeader{},
	&protocol.GetRouteInfoRequestHeader{},
	&protocol.DeleteTopicFromNamesrvRequestHeader{},
	&protocol.RegisterTopicRequestHeader{},
	&protocol.PutKVConfigRequestHeader{},
	&protocol.GetKVConfigRequestHeader{},
	&protocol.GetKVConfigResponseHeader{},
	&protocol.DeleteKVConfigRequestHeader{},
	&protocol.GetKVListByNamespaceRequestHeader{},
	&protocol.GetTopicsByClusterRequestHeader{},
	&protocol.QueryDataVersionRequestHeader{},
	&protocol.QueryDataVersionResponseHeader{},
	// replication.go
	&protocol.ReplicaHelloRequestHeader{},
	&protocol.ReplicaHelloResponseHeader{},
	&protocol.ReplicaFetchRequestHeader{},
	&protocol.ReplicaFetchResponseHeader{},
	&protocol.ReplicaSwitchRequestHeader{},
	&protocol.ReplicaPromoteRequestHeader{},
	// controller.go
	&protocol.ControllerHeartbeatRequestHeader{},
	&protocol.ControllerHeartbeatResponseHeader{},
	&protocol.ControllerNotLeaderHeader{},
	&protocol.ControllerElectRequestHeader{},
	&protocol.ControllerElectResponseHeader{},
}

// fillVariant says how fillHeader sets numbers and booleans; strings are
// always distinct and non-empty (an empty string reads back as a default for
// some optional fields, which is intended).
type fillVariant struct {
	name    string
	integer func(bits, seed int) int64
	boolean bool
}

var fillVariants = []fillVariant{
	{"small", func(_, seed int) int64 { return int64(seed) }, true},
	{"negative", func(_, seed int) int64 { return -int64(seed) * 1000 }, true},
	{"max", func(bits, _ int) int64 {
		if bits == 32 {
			return math.MaxInt32
		}
		return math.MaxInt64
	}, true},
	{"min", func(bits, _ int) int64 {
		if bits == 32 {
			return math.MinInt32
		}
		return math.MinInt64
	}, false},
	{"zero", func(int, int) int64 { return 0 }, false},
}

// fillHeader sets every exported field of the struct v points to.
func fillHeader(t *testing.T, v reflect.Value, fv fillVariant, seed *int) {
	t.Helper()
	typ := v.Type()
	for i := range v.NumField() {
		f, sf := v.Field(i), typ.Field(i)
		if !sf.IsExported() {
			continue
		}
		*seed++
		switch f.Kind() {
		case reflect.String:
			f.SetString(fmt.Sprintf("%s-%d\x01ü", sf.Name, *seed))
		case reflect.Int32, reflect.Int64, reflect.Int:
			f.SetInt(fv.integer(f.Type().Bits(), *seed))
		case reflect.Bool:
			f.SetBool(fv.boolean)
		case reflect.Pointer:
			if f.Type().Elem().Kind() != reflect.Bool {
				t.Fatalf("%s.%s: fillHeader does not know %s", typ, sf.Name, f.Type())
			}
			if fv.boolean {
				p := reflect.New(f.Type().Elem())
				p.Elem().SetBool(true)
				f.Set(p)
			}
		case reflect.Struct:
			if !sf.Anonymous {
				t.Fatalf("%s.%s: fillHeader does not know nested struct %s", typ, sf.Name, f.Type())
			}
			fillHeader(t, f, fv, seed)
		default:
			t.Fatalf("%s.%s: fillHeader does not know %s", typ, sf.Name, f.Type())
		}
	}
}

// TestHeaderRoundTrip fills every field of every header type, renders it
// with Ext, reads it back with SetExt into a fresh value and wants the same
// header, in several variants of values.
func TestHeaderRoundTrip(t *testing.T) {
	for _, h := range headerTypes {
		typ := reflect.TypeOf(h).Elem()
		for _, fv := range fillVariants {
			t.Run(typ.Name()+"/"+fv.name, func(t *testing.T) {
				want := reflect.New(typ)
				seed := 0
				fillHeader(t, want.Elem(), fv, &seed)
				ext := want.Interface().(protocol.Header).Ext()
				for k := range ext {
					testutil.True(t, k != "", "no empty ext key")
				}
				got := reflect.New(typ)
				if err := got.Interface().(protocol.Header).SetExt(ext); err != nil {
					t.Fatalf("SetExt(%q): %v", ext, err)
				}
				if !reflect.DeepEqual(got.Interface(), want.Interface()) {
					t.Fatalf("round trip through %q:\n got %+v\nwant %+v", ext, got.Elem(), want.Elem())
				}
				// The ext travels in a real frame just as well.
				cmd := remoting.NewRequest(1, ext, nil)
				for _, typ := range []remoting.SerializeType{remoting.SerializeJSON, remoting.SerializeRocketMQ} {
					cmd.Serialize = typ
					dec, err := remoting.DecodeWholeFrame(remoting.EncodeFrame(cmd))
					testutil.NoError(t, err)
					if !maps.Equal(dec.ExtFields, ext) && len(ext) > 0 {
						t.Fatalf("%v frame changed the ext: %q != %q", typ, dec.ExtFields, ext)
					}
				}
			})
		}
	}
}

// Missing or malformed fields are errors, never panics.
func TestHeaderBadExt(t *testing.T) {
	for _, h := range headerTypes {
		typ := reflect.TypeOf(h).Elem()
		t.Run(typ.Name(), func(t *testing.T) {
			fresh := func() protocol.Header { return reflect.New(typ).Interface().(protocol.Header) }
			fresh().SetExt(nil)
			fresh().SetExt(map[string]string{})
			// Every key of a full header set to junk: a header with any
			// numeric or boolean field must say so.
			full := reflect.New(typ)
			seed := 0
			fillHeader(t, full.Elem(), fillVariants[0], &seed)
			junk := map[string]string{}
			for k := range full.Interface().(protocol.Header).Ext() {
				junk[k] = "not-a-number"
			}
			err := fresh().SetExt(junk)
			if hasTypedField(typ) && err == nil {
				t.Fatalf("junk values accepted: %q", junk)
			}
		})
	}
}

func hasTypedField(typ reflect.Type) bool {
	for i := range typ.NumField() {
		f := typ.Field(i)
		switch f.Type.Kind() {
		case reflect.Int32, reflect.Int64, reflect.Int, reflect.Bool:
			return true
		case reflect.Struct:
			if f.Anonymous && hasTypedField(f.Type) {
				return true
			}
		}
	}
	return false
}

// TestHeaderListComplete finds every type in the package's source with both
// an Ext and a SetExt method and checks that headerTypes lists it.
func TestHeaderListComplete(t *testing.T) {
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	testutil.NoError(t, err)
	methods := map[string]map[string]bool{}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		testutil.NoError(t, err, name)
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv == nil || (fd.Name.Name != "Ext" && fd.Name.Name != "SetExt") {
				continue
			}
			recv := fd.Recv.List[0].Type
			if star, ok := recv.(*ast.StarExpr); ok {
				recv = star.X
			}
			if id, ok := recv.(*ast.Ident); ok && id.IsExported() {
				if methods[id.Name] == nil {
					methods[id.Name] = map[string]bool{}
				}
				methods[id.Name][fd.Name.Name] = true
			}
		}
	}
	listed := map[string]bool{}
	for _, h := range headerTypes {
		listed[reflect.TypeOf(h).Elem().Name()] = true
	}
	var missing []string
	for name, m := range methods {
		if m["Ext"] && m["SetExt"] && !listed[name] {
			missing = append(missing, name)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("header types not in headerTypes (header_roundtrip_test.go), so not round-trip tested: %v", missing)
	}
}

// The real client's requests (golden frames recorded in internal/remoting)
// decode into the typed headers, and the headers write them back unchanged.
func TestHeaderGoldenRequests(t *testing.T) {
	for name, h := range map[string]protocol.Header{
		"get_routeinfo_by_topic":        &protocol.GetRouteInfoRequestHeader{},
		"send_message":                  &protocol.SendMessageRequestHeader{},
		"send_message_transaction_half": &protocol.SendMessageRequestHeader{},
		"send_batch_message":            &protocol.SendMessageRequestHeaderV2{},
		"pull_message_push":             &protocol.PullMessageRequestHeader{},
		"pull_message_pull":             &protocol.PullMessageRequestHeader{},
		"query_consumer_offset":         &protocol.QueryConsumerOffsetRequestHeader{},
		"get_max_offset":                &protocol.QueueRequestHeader{},
		"search_offset_by_timestamp":    &protocol.SearchOffsetRequestHeader{},
		"update_consumer_offset":        &protocol.UpdateConsumerOffsetRequestHeader{},
		"get_consumer_list_by_group":    &protocol.ConsumerGroupRequestHeader{},
		"update_and_create_topic":       &protocol.CreateTopicRequestHeader{},
		"delete_topic_in_broker":        &protocol.TopicRequestHeader{},
		"delete_topic_in_namesrv":       &protocol.DeleteTopicFromNamesrvRequestHeader{},
	} {
		t.Run(name, func(t *testing.T) {
			cmd := readGoldenCommand(t, name)
			testutil.NoError(t, h.SetExt(cmd.ExtFields), "SetExt")
			if got := h.Ext(); !maps.Equal(got, cmd.ExtFields) {
				t.Fatalf("Ext wrote\n%q\nthe client sent\n%q", got, cmd.ExtFields)
			}
		})
	}
}

// readGoldenCommand decodes internal/remoting/testdata/golden/<name>.hex.
func readGoldenCommand(t *testing.T, name string) *remoting.Command {
	t.Helper()
	text, err := os.ReadFile(filepath.Join("..", "remoting", "testdata", "golden", name+".hex"))
	testutil.NoError(t, err)
	var h strings.Builder
	for line := range strings.Lines(string(text)) {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			h.WriteString(line)
		}
	}
	raw, err := hex.DecodeString(h.String())
	testutil.NoError(t, err)
	cmd, err := remoting.DecodeWholeFrame(raw)
	testutil.NoError(t, err)
	return cmd
}

func TestHeaderExtReader(t *testing.T) {
	r := protocol.NewExtReader(map[string]string{
		"s": "text", "i": "-12", "big": "9223372036854775807", "b": "true", "empty": "", "bad": "x",
	})
	testutil.Equal(t, r.String("s"), "text")
	testutil.Equal(t, r.OptString("none"), "")
	testutil.Equal(t, r.Int32("i"), int32(-12))
	testutil.Equal(t, r.Int64("big"), int64(math.MaxInt64))
	testutil.Equal(t, r.OptInt32("none", 4), int32(4))
	testutil.Equal(t, r.OptInt32("empty", 5), int32(5), "an empty optional takes the default")
	testutil.Equal(t, r.OptInt64("none", -1), int64(-1))
	testutil.Equal(t, r.OptBool("b", false), true)
	testutil.Equal(t, r.OptBool("none", true), true)
	testutil.Equal(t, r.OptBool("empty", true), true)
	testutil.NoError(t, r.Err())

	// The first error is kept; later ones do not replace it.
	testutil.Equal(t, r.Int32("big"), int32(0), "int64 value in an int32 field")
	firstErr := r.Err()
	testutil.True(t, firstErr != nil && strings.Contains(firstErr.Error(), "big"), fmt.Sprint(firstErr))
	r.String("missing")
	r.OptBool("bad", false)
	testutil.Equal(t, r.Err(), firstErr)

	r = protocol.NewExtReader(nil)
	r.Int64("need")
	testutil.True(t, r.Err() != nil && strings.Contains(r.Err().Error(), "missing ext field need"), fmt.Sprint(r.Err()))
	r = protocol.NewExtReader(map[string]string{"n": ""})
	r.Int32("n")
	testutil.True(t, r.Err() != nil, "an empty required number is an error")
	r = protocol.NewExtReader(map[string]string{"b": "yes"})
	r.OptBool("b", false)
	testutil.True(t, r.Err() != nil, "yes is not a boolean")
}

func TestHeaderExtWriter(t *testing.T) {
	w := protocol.ExtWriter{}
	w.Str("s", "").OptStr("o", "").OptStr("p", "v").Int("i", -5).Bool("b", false)
	want := map[string]string{"s": "", "p": "v", "i": "-5", "b": "false"}
	if !maps.Equal(map[string]string(w), want) {
		t.Fatalf("got %q, want %q", w, want)
	}
}
