// Command gen-protobuf writes packages/opkit/src/client/protobuf/messages.ts: for every kind of the
// Kubernetes API's GA versions that client-go knows, how its protobuf fields map to the JSON the API
// server would send for the same object. The Go types carry both encodings in their struct tags
// (`protobuf:"bytes,2,opt,name=..."` and `json:"...,omitempty"`), so reflection over them gives the exact
// mapping: field numbers, JSON names in JSON order, omitempty, pointers, inlined structs, and the types
// whose JSON is special (times, quantities, int-or-string, raw extensions).
//
//	cd scripts/gen-protobuf && go run . > ../../packages/opkit/src/client/protobuf/messages.ts
//
// Run it when the pinned k8s.io/api version (go.mod) moves with the server `opkit env` builds.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
)

// Kind codes of the table (see messages.ts's header for the format).
var special = map[reflect.Type]string{
	reflect.TypeOf(metav1.Time{}):          "t",
	reflect.TypeOf(metav1.MicroTime{}):     "T",
	reflect.TypeOf(resource.Quantity{}):    "q",
	reflect.TypeOf(intstr.IntOrString{}):   "x",
	reflect.TypeOf(runtime.RawExtension{}): "r",
	reflect.TypeOf(metav1.FieldsV1{}):      "f",
}

var jsonMarshaler = reflect.TypeOf((*json.Marshaler)(nil)).Elem()

type gen struct {
	ids      map[reflect.Type]int
	messages []string
	failed   []string
	// Messages of Go types that embed TypeMeta, and the messages each message refers to.
	typeMeta map[int]bool
	refs     map[int][]int
}

func (g *gen) fail(format string, args ...any) {
	g.failed = append(g.failed, fmt.Sprintf(format, args...))
}

// kind is the code of a non-repeated value of type t, and the message id when it is a message.
func (g *gen) kind(t reflect.Type, where string) (string, int) {
	if k, ok := special[t]; ok {
		return k, -1
	}
	switch t.Kind() {
	case reflect.String:
		return "s", -1
	case reflect.Bool:
		return "b", -1
	case reflect.Int32:
		return "i", -1
	case reflect.Int64:
		return "l", -1
	case reflect.Uint32, reflect.Uint64:
		return "u", -1
	case reflect.Float64:
		return "d", -1
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return "y", -1
		}
	case reflect.Struct:
		if t.Implements(jsonMarshaler) || reflect.PointerTo(t).Implements(jsonMarshaler) {
			g.fail("%s: %s has its own JSON form", where, t)
		}
		return "m", g.message(t)
	}
	g.fail("%s: unsupported type %s", where, t)
	return "?", -1
}

// message gives t its id, writing its fields (in Go's, hence JSON's, order) the first time.
func (g *gen) message(t reflect.Type) int {
	if id, ok := g.ids[t]; ok {
		return id
	}
	id := len(g.messages)
	g.ids[t] = id
	g.messages = append(g.messages, "")
	var fields []string
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		where := t.String() + "." + sf.Name
		jsonTag := sf.Tag.Get("json")
		if sf.Name == "TypeMeta" {
			// Never on the wire: a list's items carry no apiVersion and kind in JSON either, but a nested
			// object with them (a StatefulSet's volumeClaimTemplates, which the server defaults) has them
			// in JSON only. Kinds that reach one are left to JSON (see main).
			g.typeMeta[id] = true
			continue
		}
		if jsonTag == "-" {
			continue
		}
		protoTag := sf.Tag.Get("protobuf")
		if protoTag == "" {
			g.fail("%s: no protobuf tag", where)
			continue
		}
		num, err := strconv.Atoi(strings.Split(protoTag, ",")[1])
		if err != nil {
			g.fail("%s: protobuf tag %q", where, protoTag)
			continue
		}
		parts := strings.Split(jsonTag, ",")
		name, flags := parts[0], ""
		for _, o := range parts[1:] {
			switch o {
			case "omitempty":
				flags += "e"
			case "omitzero":
				flags += "z"
			case "inline":
				flags += "n"
			}
		}
		if sf.Anonymous && name == "" && !strings.Contains(flags, "n") {
			flags += "n"
		}
		if name == "" && !strings.Contains(flags, "n") {
			name = sf.Name
		}
		ft := sf.Type
		if ft.Kind() == reflect.Pointer {
			flags += "p"
			ft = ft.Elem()
		}
		var kind string
		ref := -1
		switch {
		case ft.Kind() == reflect.Map:
			if ft.Key().Kind() != reflect.String {
				g.fail("%s: map key %s", where, ft.Key())
			}
			vt := ft.Elem()
			var vk string
			if vt.Kind() == reflect.Slice && vt.Elem().Kind() == reflect.String {
				// A map's []string values (CertificateSigningRequest's extra) travel as a message with
				// the strings as its field 1.
				vk = "w"
			} else {
				vk, ref = g.kind(vt, where)
			}
			kind = "M" + vk
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() != reflect.Uint8:
			flags += "a"
			et := ft.Elem()
			if et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			if et.Kind() == reflect.Slice && et.Elem().Kind() != reflect.Uint8 {
				g.fail("%s: slice of slices", where)
			}
			kind, ref = g.kind(et, where)
		default:
			kind, ref = g.kind(ft, where)
		}
		if strings.Contains(flags, "z") && !strings.ContainsAny(kind, "sbilutTd") {
			// omitzero on a message would need its zero test; none of the GA kinds has one yet.
			g.fail("%s: omitzero on a %s", where, kind)
		}
		field := fmt.Sprintf("%d:%s:%s:%s", num, name, kind, flags)
		if ref >= 0 {
			field += ":" + strconv.Itoa(ref)
			g.refs[id] = append(g.refs[id], ref)
		}
		fields = append(fields, field)
	}
	g.messages[id] = strings.Join(fields, " ")
	return id
}

// nestedTypeMeta reports whether a message below root embeds TypeMeta.
func (g *gen) nestedTypeMeta(root int) bool {
	seen := map[int]bool{root: true}
	todo := append([]int(nil), g.refs[root]...)
	for len(todo) > 0 {
		id := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		if seen[id] {
			continue
		}
		seen[id] = true
		if g.typeMeta[id] {
			return true
		}
		todo = append(todo, g.refs[id]...)
	}
	return false
}

var gaVersion = regexp.MustCompile(`^v[0-9]+$`)

func main() {
	g := &gen{ids: map[reflect.Type]int{}, typeMeta: map[int]bool{}, refs: map[int][]int{}}
	kinds := map[string]int{}
	types := clientgoscheme.Scheme.AllKnownTypes()
	names := make([]string, 0, len(types))
	byName := map[string]reflect.Type{}
	for gvk, t := range types {
		if !gaVersion.MatchString(gvk.Version) || !strings.HasSuffix(gvk.Kind, "List") {
			continue
		}
		items, ok := t.FieldByName("Items")
		if !ok || items.Type.Kind() != reflect.Slice || items.Type.Elem().Kind() != reflect.Struct {
			continue
		}
		key := gvk.GroupVersion().String() + "/" + strings.TrimSuffix(gvk.Kind, "List")
		names = append(names, key)
		byName[key] = items.Type.Elem()
	}
	sort.Strings(names) // stable ids from run to run
	listMeta := g.message(reflect.TypeOf(metav1.ListMeta{}))
	status := g.message(reflect.TypeOf(metav1.Status{}))
	var jsonOnly []string
	for _, key := range names {
		root := g.message(byName[key])
		if g.nestedTypeMeta(root) {
			jsonOnly = append(jsonOnly, key)
			continue
		}
		kinds[key] = root
	}
	fmt.Fprintf(os.Stderr, "left to JSON (a nested object with apiVersion and kind): %s\n", strings.Join(jsonOnly, ", "))
	if len(g.failed) > 0 {
		fmt.Fprintln(os.Stderr, strings.Join(g.failed, "\n"))
		os.Exit(1)
	}
	version := "unknown"
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range info.Deps {
			if dep.Path == "k8s.io/api" {
				version = dep.Version
			}
		}
	}
	var b strings.Builder
	b.WriteString("// Generated by scripts/gen-protobuf from k8s.io/api " + version + ". Do not edit.\n")
	b.WriteString("//\n")
	b.WriteString("// One string per message: its fields in JSON order, space-separated, each `number:jsonName:kind:flags[:message]`.\n")
	b.WriteString("// Kinds: s string, b bool, i int32, l int64, u uint32/uint64, d double, y bytes (base64 in JSON), m message,\n")
	b.WriteString("// t Time, T MicroTime, q Quantity, x IntOrString, r RawExtension, f FieldsV1, w a list of strings\n")
	b.WriteString("// wrapped in a message (map values only); M<kind> a map from string keys. Flags: e omitempty, z omitzero, n inline, p pointer, a repeated.\n\n")
	b.WriteString("/** The k8s.io/api version these messages were generated from. */\n")
	fmt.Fprintf(&b, "export const PROTOBUF_SOURCE = %q;\n\n", "k8s.io/api "+version)
	b.WriteString("/** Message id of metav1.ListMeta. */\n")
	fmt.Fprintf(&b, "export const LIST_META = %d;\n\n", listMeta)
	b.WriteString("/** Message id of metav1.Status (a failure's answer is protobuf when the request asked for it). */\n")
	fmt.Fprintf(&b, "export const STATUS = %d;\n\n", status)
	b.WriteString("/** The messages, by id. */\n")
	b.WriteString("export const MESSAGES: readonly string[] = [\n")
	for _, m := range g.messages {
		fmt.Fprintf(&b, "  %s,\n", strconv.Quote(m))
	}
	b.WriteString("];\n\n")
	b.WriteString("/** `apiVersion/kind` of each listable kind → the message id of its objects. */\n")
	b.WriteString("export const KINDS: Readonly<Record<string, number>> = {\n")
	for _, key := range names {
		if id, ok := kinds[key]; ok {
			fmt.Fprintf(&b, "  %s: %d,\n", strconv.Quote(key), id)
		}
	}
	b.WriteString("};\n")
	os.Stdout.WriteString(b.String())
}
