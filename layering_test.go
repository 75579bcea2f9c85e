package zonemq_test

// The import rules of docs/architecture.md §5, kept true by `go list`:
//
//   - every zonemq package imports only the zonemq packages its row allows
//     (direct imports; store reaching remoting through protocol is fine);
//   - no production package imports anything outside the standard library
//     and this module (rocketmq-client-go is a test-only peer, docs/deps.md),
//     except the modules allowedThirdParty names for its package;
//   - nothing but tests imports internal/testutil;
//   - the public client packages (client, client/admin) show no internal
//     type in their exported API.
//
// Test files are exempt: tests may import whatever they need. A package in
// the table that does not exist yet is skipped; a package that exists but
// has no row fails, so a new package has to take its place in the table.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"testing"
)

const modulePath = "github.com/zonemq/zonemq"

// Package groups as docs/architecture.md §5 names them.
var (
	servers = []string{"internal/namesrv", "internal/broker", "internal/addrsrv"}
)

// allowedImports is §5's "may import" column: the zonemq packages each
// package may import directly. Anything else from this module is a
// violation.
var allowedImports = map[string][]string{
	"internal/remoting": {},
	"internal/protocol": {"internal/remoting"},
	"internal/store":    {"internal/protocol"},
	"internal/idc":      {},
	"internal/namesrv":  {"internal/remoting", "internal/protocol", "internal/idc", "internal/acl", "internal/member", "internal/metrics"},
	"internal/broker":   {"internal/remoting", "internal/protocol", "internal/store", "internal/idc", "internal/filter", "internal/acl", "internal/member", "internal/metrics", "internal/wallclock"},
	"internal/addrsrv":  {"internal/remoting", "internal/protocol", "internal/idc", "internal/acl", "internal/member", "internal/metrics"},
	"client":            {"internal/remoting", "internal/protocol", "internal/idc", "internal/filter", "internal/acl", "internal/member"},
	// The admin API (issue 26), beside the SDK as rocketmq-client-go's
	// admin/ and franz-go's kadm: built on client.Conn, never the reverse.
	"client/admin": {"client", "internal/protocol", "internal/idc"},
	"internal/devcluster": append(slices.Clone(servers), "internal/store", "client", "client/admin", "internal/controller", "internal/member",
		"internal/proxy"),
	"cmd/zonemq": append(slices.Clone(servers), "internal/devcluster", "client", "client/admin", "internal/protocol", "internal/acl", "internal/console",
		// Not in §5 yet (issue 12): the TLS flag parsing and configs.
		"internal/remoting",
		// Not in §5 yet: the disaster drill and the controller (see
		// their rows below).
		"internal/drill", "internal/controller", "internal/member", "internal/loadgen", "internal/proxy",
		// The broker command watches the clock-skew file of a chaos run.
		"internal/wallclock"),
	// Not in ARCHITECTURE.md §5 yet (issue 12): RocketMQ ACL 1.0 checking and
	// signing, standard library only, so servers and the SDK share it.
	"internal/acl":      {"internal/remoting", "internal/protocol", "internal/member"},
	"internal/testutil": {},
	// The drill's power-loss disks (FUSE); standard library and go-fuse.
	"internal/powerfs": {},
	// The broker's wall clock, which the chaos campaign's clock faults
	// step (issue 23). Standard library only.
	"internal/wallclock": {},
	// The SQL92 property-filter compiler. A leaf: the broker evaluates
	// filters on pull, the SDK checks them at Subscribe.
	"internal/filter": {},
	// The drill drives real zonemq processes and talks to them as an
	// application does, so it is held to a client application's rules: the
	// public client, never servers, store or the transport (netns only
	// places processes and sockets in an IDC's network namespace).
	// In controller mode it reads and drives the controller as the
	// operator's admin tool does (internal/controller's client).
	"internal/drill": {"client", "client/admin", "internal/protocol", "internal/idc", "internal/netns", "internal/ledger", "internal/controller", "internal/member", "internal/store", "internal/powerfs", "internal/wallclock"},
	// The drill's checker (issue 10): a leaf over plain records, reusable
	// by any test that keeps a ledger of acknowledgements and deliveries.
	"internal/ledger": {},
	// Not in docs/architecture.md §5 yet: the failover controller (issue 10)
	// speaks the remoting protocol and knows nothing of servers or store.
	"internal/controller": {"internal/remoting", "internal/protocol", "internal/acl", "internal/member"},
	// The load generator behind `zonemq bench` (issue 26): a client
	// application, held to the public SDK like the drill.
	"internal/loadgen": {"client", "client/admin", "internal/protocol", "internal/rmqpb"},
	// Cluster-member authentication (issue 22): the cluster secret's
	// request MAC and the derived mutual TLS. Standard library only.
	"internal/member": {},
	// Not in ARCHITECTURE.md §5 yet. Network namespaces for tests and the
	// drill: it drives ip and tc and knows nothing of zonemq.
	"internal/netns": {},
	// Not in §5 yet (issue 14). The /metrics endpoint every server role
	// serves; it knows no zonemq package.
	"internal/metrics": {},
	// The SDK's Prometheus collectors, apart from client so that the SDK
	// itself stays standard-library only.
	"client/clientmetrics": {"client"},
	// Not in §5 yet (issue 14). The web console is a client application:
	// it sees the cluster through the address servers' HTTP API and the
	// public client's admin API, never through server packages.
	"internal/console": {"client", "client/admin", "internal/protocol"},
	// The RocketMQ 5 gRPC API, generated (issue 24): a leaf.
	"internal/rmqpb": {},
	// The gRPC access point (issue 24), its own role: a client application
	// of the cluster, as RocketMQ's proxy in cluster mode, so it reaches
	// the brokers through the SDK and never imports a server package.
	"internal/proxy": {"client", "internal/rmqpb", "internal/protocol", "internal/idc", "internal/acl"},
	// The official RocketMQ 5 Go client in a process of its own, for tests
	// (it registers the same protobuf names as internal/rmqpb).
	"test/v5peer": {},
	// The stock remoting Go client as one application of the chaos
	// campaign (issue 23), a process of its own like v5peer.
	"test/rmqpeer": {},
}

// prometheusClient is the module of prometheus/client_golang.
const prometheusClient = "github.com/prometheus/client_golang"

// allowedThirdParty names the modules outside the standard library that a
// package's non-test code may import, each with its reason in docs/deps.md.
var allowedThirdParty = map[string][]string{
	// Raft, its log and stable store (issue 10 mandates them), the
	// logger interface Raft takes, and bbolt's open options (a timeout).
	"internal/controller": {"github.com/hashicorp/raft", "github.com/hashicorp/raft-boltdb/v2",
		"github.com/hashicorp/go-hclog", "go.etcd.io/bbolt"},
	// prometheus/client_golang serves and defines the metrics (issue 14;
	// docs/deps.md); the SDK itself does not import it.
	"internal/metrics": {prometheusClient},
	// Porcupine checks the controller's epoch history as a linearizable
	// register (issue 23; docs/deps.md).
	"internal/ledger": {"github.com/anishathalye/porcupine"},
	// go-fuse serves the drill's power-loss disks (issue 23; docs/deps.md).
	"internal/powerfs":     {"github.com/hanwen/go-fuse/v2"},
	"internal/broker":      {prometheusClient},
	"internal/namesrv":     {prometheusClient},
	"internal/addrsrv":     {prometheusClient},
	"client/clientmetrics": {prometheusClient},
	// gRPC and protobuf: the RocketMQ 5 clients speak nothing else.
	"internal/rmqpb": {"google.golang.org/grpc", "google.golang.org/protobuf"},
	"internal/proxy": {"google.golang.org/grpc", "google.golang.org/protobuf"},
	// `zonemq bench --access-point` speaks the RocketMQ 5 protocol.
	"internal/loadgen": {"google.golang.org/grpc"},
	"test/v5peer":      {"github.com/apache/rocketmq-clients/golang/v5"},
	"test/rmqpeer":     {"github.com/apache/rocketmq-client-go/v2"},
}

// goPackage is the part of `go list -json` output the checks read.
type goPackage struct {
	ImportPath string
	Name       string
	Standard   bool
	GoFiles    []string
	Imports    []string
	Export     string
	Module     *struct{ Path string }
	Error      *struct{ Err string }
}

// goList runs `go list -json` with args and decodes every package printed.
func goList(t *testing.T, args ...string) []goPackage {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is not on PATH: %v", err)
	}
	cmd := exec.Command(goBin, append([]string{"list", "-json"}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %v: %v\n%s", args, err, stderr.String())
	}
	var pkgs []goPackage
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p goPackage
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decoding go list output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// rel strips the module path: "github.com/zonemq/zonemq/client" → "client".
func rel(importPath string) (string, bool) {
	if importPath == modulePath {
		return ".", true
	}
	r, ok := strings.CutPrefix(importPath, modulePath+"/")
	return r, ok
}

func TestLayeringImportTable(t *testing.T) {
	pkgs := goList(t, "-deps", "./...")
	byPath := map[string]goPackage{}
	for _, p := range pkgs {
		byPath[p.ImportPath] = p
	}
	present := map[string]bool{}
	for _, p := range pkgs {
		r, ours := rel(p.ImportPath)
		if !ours {
			continue
		}
		if p.Error != nil {
			t.Errorf("%s: %s", r, p.Error.Err)
			continue
		}
		if len(p.GoFiles) == 0 {
			continue // test-only (test/e2e, this package): exempt
		}
		present[r] = true
		allowed, known := allowedImports[r]
		if !known {
			t.Errorf("package %s has no row in the import table (docs/architecture.md §5 and allowedImports here)", r)
			continue
		}
		for _, imp := range p.Imports {
			if ir, ours := rel(imp); ours {
				if ir == "internal/testutil" {
					t.Errorf("%s imports internal/testutil, which only tests may import", r)
				} else if !slices.Contains(allowed, ir) {
					t.Errorf("%s imports %s; its row allows only %v", r, ir, allowed)
				}
				continue
			}
			dep, ok := byPath[imp]
			if ok && dep.Module != nil && slices.Contains(allowedThirdParty[r], dep.Module.Path) {
				continue
			}
			if !ok || !dep.Standard {
				t.Errorf("%s imports %s, which is neither the standard library nor zonemq (see docs/deps.md)", r, imp)
			}
		}
	}
	var missing []string
	for r := range allowedImports {
		if !present[r] {
			missing = append(missing, r)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Logf("not checked, no such package yet: %v", missing)
	}
}

// TestLayeringClientAPI checks the public SDK's exported API, and its admin
// API's, for types from internal packages, which users could not name.
func TestLayeringClientAPI(t *testing.T) {
	if _, err := os.Stat("client"); err != nil {
		t.Skip("no client package yet")
	}
	imp := exportImporter(t, "./client", "./client/admin")
	for _, path := range []string{"client", "client/admin"} {
		pkg, err := imp.Import(modulePath + "/" + path)
		if err != nil {
			t.Fatalf("loading the %s package's export data: %v", path, err)
		}
		for _, leak := range internalTypesInAPI(pkg) {
			t.Errorf("%s's exported API shows an internal type: %s", path, leak)
		}
	}
}

// exportImporter builds the packages (and their dependencies) and returns an
// importer that reads their compiled export data.
func exportImporter(t *testing.T, patterns ...string) types.Importer {
	t.Helper()
	exports := map[string]string{}
	for _, p := range goList(t, append([]string{"-export", "-deps"}, patterns...)...) {
		if p.Export != "" {
			exports[p.ImportPath] = p.Export
		}
	}
	return importer.ForCompiler(token.NewFileSet(), "gc", func(path string) (io.ReadCloser, error) {
		f, ok := exports[path]
		if !ok {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(f)
	})
}

func isInternalPath(path string) bool {
	return strings.Contains(path, "/internal/") || strings.HasSuffix(path, "/internal")
}

// internalTypesInAPI lists every place pkg's exported API mentions a named
// type from an internal package: exported functions, variables, constants,
// type aliases, exported struct fields (embedded ones included), interface
// methods and the exported methods of exported types (promoted ones too).
func internalTypesInAPI(pkg *types.Package) []string {
	var leaks []string
	seen := map[types.Type]bool{}
	var walk func(where string, t types.Type)
	walk = func(where string, t types.Type) {
		t = types.Unalias(t)
		switch t := t.(type) {
		case *types.Named:
			if obj := t.Obj(); obj.Pkg() != nil && isInternalPath(obj.Pkg().Path()) {
				leaks = append(leaks, fmt.Sprintf("%s: %s.%s", where, obj.Pkg().Path(), obj.Name()))
			}
			for i := range t.TypeArgs().Len() {
				walk(where, t.TypeArgs().At(i))
			}
			// The package's own named types are checked from the top level;
			// another package's (time.Duration, …) need no look inside.
		case *types.Pointer:
			walk(where, t.Elem())
		case *types.Slice:
			walk(where, t.Elem())
		case *types.Array:
			walk(where, t.Elem())
		case *types.Chan:
			walk(where, t.Elem())
		case *types.Map:
			walk(where, t.Key())
			walk(where, t.Elem())
		case *types.Signature:
			for i := range t.Params().Len() {
				walk(where, t.Params().At(i).Type())
			}
			for i := range t.Results().Len() {
				walk(where, t.Results().At(i).Type())
			}
		case *types.Struct:
			if seen[t] {
				return
			}
			seen[t] = true
			for i := range t.NumFields() {
				if f := t.Field(i); f.Exported() {
					walk(where+"."+f.Name(), f.Type())
				}
			}
		case *types.Interface:
			if seen[t] {
				return
			}
			seen[t] = true
			for i := range t.NumEmbeddeds() {
				walk(where, t.EmbeddedType(i))
			}
			for i := range t.NumExplicitMethods() {
				if m := t.ExplicitMethod(i); m.Exported() {
					walk(where+"."+m.Name(), m.Type())
				}
			}
		}
	}
	scope := pkg.Scope()
	for _, name := range scope.Names() {
		obj := scope.Lookup(name)
		if !obj.Exported() {
			continue
		}
		where := pkg.Name() + "." + name
		switch obj := obj.(type) {
		case *types.TypeName:
			if obj.IsAlias() {
				walk(where, obj.Type())
				continue
			}
			named, ok := obj.Type().(*types.Named)
			if !ok {
				continue
			}
			walk(where, named.Underlying())
			mset := types.NewMethodSet(types.NewPointer(named))
			for i := range mset.Len() {
				if m := mset.At(i).Obj(); m.Exported() {
					walk(where+"."+m.Name(), m.Type())
				}
			}
		default: // funcs, vars, consts
			walk(where, obj.Type())
		}
	}
	sort.Strings(leaks)
	return slices.Compact(leaks)
}

// The checker itself, on a package written to leak in every way it knows.
func TestLayeringClientAPICheckerFindsLeaks(t *testing.T) {
	const src = `package leaky

import (
	"time"

	"github.com/zonemq/zonemq/internal/protocol"
	"github.com/zonemq/zonemq/internal/remoting"
)

type Clean struct {
	Name    string
	Timeout time.Duration
	conn    *remoting.Conn
}

func (c *Clean) Do(x int) (string, error) { return "", nil }
func (c *Clean) conn2() *remoting.Conn    { return nil }
func helper() protocol.RequestCode        { return 0 }

type Field struct{ Conn *remoting.Conn }
type Embeds struct{ *remoting.Client }
type hidden struct{ *remoting.Server }
type Promotes struct{ hidden }
type Alias = remoting.Command
type Iface interface{ Kind() remoting.SerializeType }
type Generic[T any] struct{ V T }

func Make() map[string][]*protocol.MessageExt     { return nil }
func Callback(f func(protocol.ResponseCode))        {}
func Inst() Generic[protocol.MessageQueue]          { return Generic[protocol.MessageQueue]{} }
func FromChan() <-chan [2]*remoting.Command         { return nil }
func Anon() struct{ Q protocol.MessageQueue }       { return struct{ Q protocol.MessageQueue }{} }

var V protocol.RequestCode

const C = protocol.SendMessage
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "leaky.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	conf := types.Config{Importer: exportImporter(t, "./internal/remoting", "./internal/protocol")}
	pkg, err := conf.Check("example.com/leaky", fset, []*ast.File{f}, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(internalTypesInAPI(pkg), "\n")
	for _, want := range []string{
		"leaky.Field.Conn: " + modulePath + "/internal/remoting.Conn",
		"leaky.Embeds.Client: " + modulePath + "/internal/remoting.Client",
		"leaky.Embeds.Invoke: " + modulePath + "/internal/remoting.Command",
		"leaky.Promotes.Handle: " + modulePath + "/internal/remoting.Handler",
		"leaky.Alias: " + modulePath + "/internal/remoting.Command",
		"leaky.Iface.Kind: " + modulePath + "/internal/remoting.SerializeType",
		"leaky.Make: " + modulePath + "/internal/protocol.MessageExt",
		"leaky.Callback: " + modulePath + "/internal/protocol.ResponseCode",
		"leaky.Inst: " + modulePath + "/internal/protocol.MessageQueue",
		"leaky.FromChan: " + modulePath + "/internal/remoting.Command",
		"leaky.Anon.Q: " + modulePath + "/internal/protocol.MessageQueue",
		"leaky.V: " + modulePath + "/internal/protocol.RequestCode",
		"leaky.C: " + modulePath + "/internal/protocol.RequestCode",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("leak %q not reported; got:\n%s", want, got)
		}
	}
	for _, clean := range []string{"leaky.Clean", "leaky.helper", "leaky.hidden", "leaky.Generic:"} {
		if strings.Contains(got, clean) {
			t.Errorf("%s reported, but it leaks nothing:\n%s", clean, got)
		}
	}
}
