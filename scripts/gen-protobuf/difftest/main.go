// Command difftest writes test data for opkit's protobuf decoder: objects of every GA kind, each as the
// protobuf the API server sends and as the JSON it sends (encoding/json), one line per object:
// `apiVersion/kind \t base64(protobuf) \t JSON`. packages/opkit/src/client/protobuf/difftest.test.ts decodes
// the protobuf and checks it gives exactly the JSON (same keys, values and order).
//
// The objects are random (the round-trip fuzzer of k8s.io/apimachinery, as the API's own tests use), then
// normalized as etcd storage does (a protobuf round trip), plus a few made by hand for forms random
// values rarely reach (the Unix epoch, a __proto__ key, invalid UTF-8, nil pointers and empty values).
//
//	cd scripts/gen-protobuf && go run ./difftest 100 1 > objects.tsv
package main

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/apitesting/fuzzer"
	metafuzzer "k8s.io/apimachinery/pkg/apis/meta/fuzzer"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
)

type message interface {
	Marshal() ([]byte, error)
	Unmarshal([]byte) error
}

var gaVersion = regexp.MustCompile(`^v[0-9]+$`)

// emit writes obj after a protobuf round trip (what the API server holds after reading it from etcd).
func emit(out *bufio.Writer, key string, obj, fresh message) {
	b, err := obj.Marshal()
	if err != nil {
		fmt.Fprintln(os.Stderr, key, "marshal:", err)
		return
	}
	if err := fresh.Unmarshal(b); err != nil {
		fmt.Fprintln(os.Stderr, key, "unmarshal:", err)
		return
	}
	wire, _ := fresh.Marshal()
	j, err := json.Marshal(fresh)
	if err != nil {
		return // the JSON answer would fail too
	}
	fmt.Fprintf(out, "%s\t%s\t%s\n", key, base64.StdEncoding.EncodeToString(wire), j)
}

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: difftest <objects per kind> <seed>")
		os.Exit(2)
	}
	n, _ := strconv.Atoi(os.Args[1])
	seed, _ := strconv.ParseInt(os.Args[2], 10, 64)
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	handMade(out)
	codecs := serializer.NewCodecFactory(clientgoscheme.Scheme)
	f := fuzzer.FuzzerFor(metafuzzer.Funcs, rand.NewSource(seed), codecs).NumElements(0, 3).NilChance(0.3)
	types := clientgoscheme.Scheme.AllKnownTypes()
	for gvk := range types {
		if !gaVersion.MatchString(gvk.Version) || strings.HasSuffix(gvk.Kind, "List") {
			continue
		}
		if _, ok := types[gvk.GroupVersion().WithKind(gvk.Kind+"List")]; !ok {
			continue
		}
		key := gvk.GroupVersion().String() + "/" + gvk.Kind
		for i := 0; i < n; i++ {
			obj, _ := clientgoscheme.Scheme.New(gvk)
			f.Fill(obj)
			fresh, _ := clientgoscheme.Scheme.New(gvk)
			emit(out, key, obj.(message), fresh.(message))
		}
	}
}

func handMade(out *bufio.Writer) {
	epoch := metav1.NewTime(time.Unix(0, 0))
	microEpoch := metav1.NewMicroTime(time.Unix(0, 0))
	emit(out, "v1/ConfigMap", &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "epoch", CreationTimestamp: epoch},
		Data:       map[string]string{"__proto__": "x", "constructor": "y", "0": "z"},
	}, &corev1.ConfigMap{})
	emit(out, "v1/ConfigMap", &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "utf8"},
		Data:       map[string]string{"a": "\xe2\x82A", "b": "\xf0\x9f\x98", "c": "\xed\xa0\x80\xc0\xafa\xc3\xa9\xef\xbf\xbd"},
	}, &corev1.ConfigMap{})
	emit(out, "coordination.k8s.io/v1/Lease", &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "l"},
		Spec:       coordinationv1.LeaseSpec{RenewTime: &microEpoch},
	}, &coordinationv1.Lease{})
	emit(out, "v1/Event", &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "e"},
		FirstTimestamp: epoch,
		LastTimestamp:  metav1.NewTime(time.Unix(-1, 0)),
	}, &corev1.Event{})
	emit(out, "v1/PersistentVolumeClaim", &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "c"},
		Spec: corev1.PersistentVolumeClaimSpec{
			DataSource: &corev1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: "src"},
		},
	}, &corev1.PersistentVolumeClaim{})
	emit(out, "certificates.k8s.io/v1/CertificateSigningRequest", &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: "csr"},
		Spec:       certificatesv1.CertificateSigningRequestSpec{Extra: map[string]certificatesv1.ExtraValue{"k": nil}},
	}, &certificatesv1.CertificateSigningRequest{})
}
