// Command go-appservice is the controller-runtime peer of opkit's AppService operator (seed 001), used
// only by `make bench` to measure opkit beside the Go standard. It reconciles the same CRD
// (kosmos.io/v1 AppService) into the same children (a Deployment and a NodePort Service, applied
// server-side with a controller owner reference) and writes the same status fields, only when they
// differ from the server's.
//
// With --probe-pods it does not reconcile: it caches every Pod (or those of --namespace) with
// controller-runtime's cache, waits for the sync, collects garbage and prints one JSON line with the
// heap, the RSS and the sync time; --stay keeps it running for sampling afterwards, and --content-type
// application/json reads the Pods as JSON, the wire format opkit reads, instead of protobuf.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// ---- the AppService kind (kosmos.io/v1), written by hand: no code generation in the bench ----

var groupVersion = schema.GroupVersion{Group: "kosmos.io", Version: "v1"}

// AppServiceSpec is seed 001's spec: size, image and the Service's ports.
type AppServiceSpec struct {
	Size  int32                `json:"size"`
	Image string               `json:"image"`
	Ports []corev1.ServicePort `json:"ports,omitempty"`
}

// AppServiceStatus mirrors the Deployment's counts plus the operator's Ready condition.
type AppServiceStatus struct {
	ObservedGeneration  int64              `json:"observedGeneration,omitempty"`
	Replicas            *int32             `json:"replicas,omitempty"`
	ReadyReplicas       *int32             `json:"readyReplicas,omitempty"`
	AvailableReplicas   *int32             `json:"availableReplicas,omitempty"`
	UpdatedReplicas     *int32             `json:"updatedReplicas,omitempty"`
	UnavailableReplicas *int32             `json:"unavailableReplicas,omitempty"`
	Conditions          []metav1.Condition `json:"conditions,omitempty"`
}

// AppService is the custom resource.
type AppService struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              AppServiceSpec   `json:"spec"`
	Status            AppServiceStatus `json:"status,omitempty"`
}

// AppServiceList is a list of AppServices.
type AppServiceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []AppService `json:"items"`
}

func cp32(p *int32) *int32 {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// DeepCopyInto copies the AppService into out.
func (in *AppService) DeepCopyInto(out *AppService) {
	*out = *in
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	if in.Spec.Ports != nil {
		out.Spec.Ports = make([]corev1.ServicePort, len(in.Spec.Ports))
		for i := range in.Spec.Ports {
			in.Spec.Ports[i].DeepCopyInto(&out.Spec.Ports[i])
		}
	}
	s := &out.Status
	s.Replicas, s.ReadyReplicas, s.AvailableReplicas = cp32(in.Status.Replicas), cp32(in.Status.ReadyReplicas), cp32(in.Status.AvailableReplicas)
	s.UpdatedReplicas, s.UnavailableReplicas = cp32(in.Status.UpdatedReplicas), cp32(in.Status.UnavailableReplicas)
	if in.Status.Conditions != nil {
		s.Conditions = make([]metav1.Condition, len(in.Status.Conditions))
		for i := range in.Status.Conditions {
			in.Status.Conditions[i].DeepCopyInto(&s.Conditions[i])
		}
	}
}

// DeepCopyObject implements runtime.Object.
func (in *AppService) DeepCopyObject() k8sruntime.Object {
	out := &AppService{}
	in.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (in *AppServiceList) DeepCopyObject() k8sruntime.Object {
	out := &AppServiceList{TypeMeta: in.TypeMeta}
	in.ListMeta.DeepCopyInto(&out.ListMeta)
	if in.Items != nil {
		out.Items = make([]AppService, len(in.Items))
		for i := range in.Items {
			in.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
	return out
}

// ---- the reconciler ----

const fieldOwner = "appservice"

type reconciler struct {
	client.Client
	writes *writeCounter
}

func (r *reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	if r.writes != nil {
		r.writes.reconcileStarted(req)
	}
	app := &AppService{}
	if err := r.Get(ctx, req.NamespacedName, app); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	labels := map[string]string{"app": app.Name}
	owner := metav1ac.OwnerReference().WithAPIVersion(groupVersion.String()).WithKind("AppService").
		WithName(app.Name).WithUID(app.UID).WithController(true).WithBlockOwnerDeletion(true)

	// Container ports: a numeric targetPort is the port, a named one names it, none means `port`.
	var cports []*corev1ac.ContainerPortApplyConfiguration
	seen := map[string]bool{}
	for _, p := range app.Spec.Ports {
		proto := p.Protocol
		if proto == "" {
			proto = corev1.ProtocolTCP
		}
		port := p.Port
		name := ""
		if p.TargetPort.Type == 1 { // intstr.String
			name = p.TargetPort.StrVal
		} else if p.TargetPort.IntVal != 0 {
			port = p.TargetPort.IntVal
		}
		key := strconv.Itoa(int(port)) + "/" + string(proto)
		if seen[key] {
			continue
		}
		seen[key] = true
		cp := corev1ac.ContainerPort().WithContainerPort(port).WithProtocol(proto)
		if name != "" {
			cp = cp.WithName(name)
		}
		cports = append(cports, cp)
	}
	dep := appsv1ac.Deployment(app.Name, app.Namespace).WithLabels(labels).WithOwnerReferences(owner).
		WithSpec(appsv1ac.DeploymentSpec().WithReplicas(app.Spec.Size).
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(labels)).
			WithTemplate(corev1ac.PodTemplateSpec().WithLabels(labels).WithSpec(corev1ac.PodSpec().
				WithContainers(corev1ac.Container().WithName(app.Name).WithImage(app.Spec.Image).
					WithImagePullPolicy(corev1.PullIfNotPresent).WithPorts(cports...)))))
	var sports []*corev1ac.ServicePortApplyConfiguration
	for _, p := range app.Spec.Ports {
		sp := corev1ac.ServicePort().WithPort(p.Port)
		if p.Name != "" {
			sp = sp.WithName(p.Name)
		}
		if p.Protocol != "" {
			sp = sp.WithProtocol(p.Protocol)
		}
		if p.TargetPort.Type == 1 || p.TargetPort.IntVal != 0 {
			sp = sp.WithTargetPort(p.TargetPort)
		}
		if p.NodePort != 0 {
			sp = sp.WithNodePort(p.NodePort)
		}
		sports = append(sports, sp)
	}
	svc := corev1ac.Service(app.Name, app.Namespace).WithLabels(labels).WithOwnerReferences(owner).
		WithSpec(corev1ac.ServiceSpec().WithType(corev1.ServiceTypeNodePort).WithSelector(labels).WithPorts(sports...))

	opts := []client.ApplyOption{client.FieldOwner(fieldOwner), client.ForceOwnership}
	if err := r.Apply(ctx, dep, opts...); err != nil {
		return reconcile.Result{}, err
	}
	if err := r.Apply(ctx, svc, opts...); err != nil {
		return reconcile.Result{}, err
	}
	// The applied Deployment's status, as the cache holds it (the apply response is not kept by Apply).
	d := &appsv1.Deployment{}
	if err := r.Get(ctx, req.NamespacedName, d); err != nil && !apierrors.IsNotFound(err) {
		return reconcile.Result{}, err
	}
	ds := d.Status
	ready := d.Generation != 0 && ds.ObservedGeneration >= d.Generation && ds.AvailableReplicas == app.Spec.Size &&
		ds.UpdatedReplicas == app.Spec.Size && ds.Replicas == app.Spec.Size

	want := app.Status.DeepCopyObjectStatus()
	want.ObservedGeneration = app.Generation
	want.Replicas, want.ReadyReplicas, want.AvailableReplicas = nz(ds.Replicas), nz(ds.ReadyReplicas), nz(ds.AvailableReplicas)
	want.UpdatedReplicas, want.UnavailableReplicas = nz(ds.UpdatedReplicas), nz(ds.UnavailableReplicas)
	var conds []metav1.Condition
	for _, c := range ds.Conditions {
		if string(c.Type) == "Ready" {
			continue
		}
		prev := meta.FindStatusCondition(app.Status.Conditions, string(c.Type))
		nc := metav1.Condition{Type: string(c.Type), Status: metav1.ConditionStatus(c.Status), Reason: c.Reason,
			Message: c.Message, LastTransitionTime: c.LastTransitionTime}
		if prev != nil && prev.Status == nc.Status {
			nc.LastTransitionTime = prev.LastTransitionTime
		}
		conds = append(conds, nc)
	}
	if prev := meta.FindStatusCondition(app.Status.Conditions, "Ready"); prev != nil {
		conds = append(conds, *prev)
	}
	rc := metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse, Reason: "Progressing", ObservedGeneration: app.Generation,
		Message: fmt.Sprintf("waiting for Deployment/%s: %d of %d pods available, %d updated", app.Name, ds.AvailableReplicas, app.Spec.Size, ds.UpdatedReplicas)}
	if ready {
		rc.Status, rc.Reason, rc.Message = metav1.ConditionTrue, "Available", fmt.Sprintf("%d of %d pods available", ds.AvailableReplicas, app.Spec.Size)
	}
	meta.SetStatusCondition(&conds, rc)
	want.Conditions = conds
	if equality.Semantic.DeepEqual(app.Status, *want) {
		return reconcile.Result{}, nil
	}
	app.Status = *want
	if err := r.Status().Update(ctx, app, client.FieldOwner(fieldOwner)); err != nil {
		return reconcile.Result{}, err
	}
	if r.writes != nil {
		r.writes.statusWrites.Add(1)
	}
	return reconcile.Result{}, nil
}

// DeepCopyObjectStatus copies the status (the desired one starts from it).
func (in *AppServiceStatus) DeepCopyObjectStatus() *AppServiceStatus {
	a := &AppService{Status: *in}
	out := &AppService{}
	a.DeepCopyInto(out)
	return &out.Status
}

func nz(v int32) *int32 {
	if v == 0 {
		return nil
	}
	return &v
}

// ---- entry ----

func main() {
	var (
		probePods     = flag.Bool("probe-pods", false, "cache Pods with controller-runtime's cache, print memory as JSON and exit")
		stay          = flag.Bool("stay", false, "with --probe-pods: keep running after printing")
		namespace     = flag.String("namespace", "", "with --probe-pods: only this namespace (empty: all)")
		contentType   = flag.String("content-type", "", "wire format of built-in kinds: empty for controller-runtime's default (protobuf), or application/json (as opkit reads them)")
		metricsAddr   = flag.String("metrics-bind-address", "0", "address of /metrics (0: off)")
		probeAddr     = flag.String("health-probe-bind-address", "0", "address of /healthz and /readyz (0: off); /readyz is 200 once the caches synced")
		leaderElect   = flag.Bool("leader-elect", false, "run leader election (Lease appservice-go in --leader-election-namespace)")
		leaderNS      = flag.String("leader-election-namespace", "default", "namespace of the leader Lease")
		qps           = flag.Float64("qps", 0, "client qps (0: controller-runtime's default; negative: no client-side limit)")
		burst         = flag.Int("burst", 0, "client burst (0: controller-runtime's default)")
		workers       = flag.Int("workers", 1, "concurrent reconciles")
		logReconciles = flag.Bool("log-reconciles", false, "print one line per reconcile start (for latency)")
		benchQueueN   = flag.Int("bench-queue", 0, "measure client-go's workqueue: add/get/done of this many keys with 4 workers, print ops/s and exit")
	)
	flag.Parse()
	start := time.Now()
	if *benchQueueN > 0 {
		benchQueue(*benchQueueN)
		return
	}
	ctrl.SetLogger(zap.New(zap.UseDevMode(false)))
	cfg := ctrl.GetConfigOrDie()
	// controller-runtime asks for protobuf only when the config names no content type.
	if *contentType != "" {
		cfg.ContentType = *contentType
	}
	if *qps != 0 {
		cfg.QPS = float32(*qps)
	}
	if *burst > 0 {
		cfg.Burst = *burst
	}
	ctx := ctrl.SetupSignalHandler()
	if *probePods {
		probe(ctx, cfg, *namespace, *stay, start)
		return
	}
	scheme := k8sruntime.NewScheme()
	must(clientgoscheme.AddToScheme(scheme))
	scheme.AddKnownTypes(groupVersion, &AppService{}, &AppServiceList{})
	metav1.AddToGroupVersion(scheme, groupVersion)

	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  scheme,
		Metrics:                 metricsserver.Options{BindAddress: *metricsAddr},
		HealthProbeBindAddress:  *probeAddr,
		LeaderElection:          *leaderElect,
		LeaderElectionID:        "appservice-go",
		LeaderElectionNamespace: *leaderNS,
		// As opkit does by default: a stopping leader hands the Lease back at once.
		LeaderElectionReleaseOnCancel: true,
	})
	must(err)
	wc := &writeCounter{log: *logReconciles, pending: map[string]time.Time{}}
	r := &reconciler{Client: mgr.GetClient(), writes: wc}
	// The recorder is the last predicate of each watch: it sees only events that are queued. Children
	// are named as their AppService, so an event's object names the key it wakes.
	rec := wc.predicate()
	must(ctrl.NewControllerManagedBy(mgr).
		For(&AppService{}, builder.WithPredicates(predicate.GenerationChangedPredicate{}, rec)).
		Owns(&appsv1.Deployment{}, builder.WithPredicates(rec)).
		Owns(&corev1.Service{}, builder.WithPredicates(rec)).
		WithOptions(controller.Options{MaxConcurrentReconciles: *workers}).
		Complete(r))
	// The controller's informers registered now, so that WaitForCacheSync below waits for all three (the
	// controller would register them only once it starts).
	for _, obj := range []client.Object{&AppService{}, &appsv1.Deployment{}, &corev1.Service{}} {
		_, err := mgr.GetCache().GetInformer(ctx, obj, cache.BlockUntilSynced(false))
		must(err)
	}
	// Ready once the caches synced, as opkit's /readyz ("informers"): the bench's startup figure polls it.
	var synced atomic.Bool
	must(mgr.AddReadyzCheck("informers", func(_ *http.Request) error {
		if !synced.Load() {
			return errors.New("caches not synced")
		}
		return nil
	}))
	must(mgr.AddHealthzCheck("ping", healthz.Ping))
	go func() {
		// "ready" once the caches are synced: the bench measures start-up CPU to this line.
		if mgr.GetCache().WaitForCacheSync(ctx) {
			synced.Store(true)
			emit(map[string]any{"event": "ready", "ms": time.Since(start).Milliseconds(), "cpuSeconds": cpuSeconds()})
		}
	}()
	go func() {
		<-mgr.Elected()
		emit(map[string]any{"event": "elected", "ms": time.Since(start).Milliseconds()})
	}()
	if err := mgr.Start(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

type writeCounter struct {
	log          bool
	statusWrites atomic.Int64
	mu           sync.Mutex
	pending      map[string]time.Time // key → arrival of its first event not yet reconciled
}

// predicate records, with --log-reconciles, when the first not yet reconciled event of each key was
// handled (the moment controller-runtime's handler queues the key), and lets every event through.
func (w *writeCounter) predicate() predicate.Predicate {
	record := func(o client.Object) bool {
		if w.log {
			now := time.Now()
			key := o.GetNamespace() + "/" + o.GetName()
			w.mu.Lock()
			if _, ok := w.pending[key]; !ok {
				w.pending[key] = now
			}
			w.mu.Unlock()
		}
		return true
	}
	return predicate.Funcs{
		CreateFunc:  func(e event.CreateEvent) bool { return record(e.Object) },
		UpdateFunc:  func(e event.UpdateEvent) bool { return record(e.ObjectNew) },
		DeleteFunc:  func(e event.DeleteEvent) bool { return record(e.Object) },
		GenericFunc: func(e event.GenericEvent) bool { return record(e.Object) },
	}
}

// reconcileStarted prints, with --log-reconciles, one line per reconcile start with the time since the
// first event that queued it (event → reconcile start; -1 when no event was recorded, e.g. a retry).
func (w *writeCounter) reconcileStarted(req reconcile.Request) {
	if !w.log {
		return
	}
	now := time.Now()
	key := req.String()
	w.mu.Lock()
	at, ok := w.pending[key]
	delete(w.pending, key)
	w.mu.Unlock()
	queuedUs := int64(-1)
	if ok {
		queuedUs = now.Sub(at).Microseconds()
	}
	emit(map[string]any{"event": "reconcile", "key": key, "tsNs": now.UnixNano(), "queuedUs": queuedUs})
}

func probe(ctx context.Context, cfg *rest.Config, namespace string, stay bool, start time.Time) {
	scheme := k8sruntime.NewScheme()
	must(clientgoscheme.AddToScheme(scheme))
	opts := cache.Options{Scheme: scheme}
	if namespace != "" {
		opts.DefaultNamespaces = map[string]cache.Config{namespace: {}}
	}
	c, err := cache.New(cfg, opts)
	must(err)
	cpuStart := cpuSeconds()
	inf, err := c.GetInformer(ctx, &corev1.Pod{})
	must(err)
	syncStart := time.Now()
	go func() { _ = c.Start(ctx) }()
	// The informer's own HasSynced, polled every millisecond: the cache's WaitForCacheSync polls every
	// 100 ms (client-go's syncedPollPeriod), which would count up to 100 ms more against Go.
	for !inf.HasSynced() {
		if ctx.Err() != nil {
			os.Exit(1)
		}
		time.Sleep(time.Millisecond)
	}
	syncMs := time.Since(syncStart).Milliseconds()
	list := &corev1.PodList{}
	must(c.List(ctx, list))
	n := len(list.Items)
	list = nil
	runtime.GC()
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	emit(map[string]any{"event": "probe", "pods": n, "syncMs": syncMs, "startMs": time.Since(start).Milliseconds(),
		"heapBytes": ms.HeapAlloc, "rssBytes": rssBytes(), "cpuSeconds": cpuSeconds(), "syncCpuSeconds": cpuSeconds() - cpuStart})
	if stay {
		<-ctx.Done()
	}
}

// benchQueue is the peer of opkit's queue figure: keys added while 4 workers get and mark them done.
func benchQueue(keys int) {
	q := workqueue.NewTyped[string]()
	names := make([]string, keys)
	for i := range names {
		names[i] = fmt.Sprintf("ns-%d/obj-%d", i%10, i)
	}
	var done atomic.Int64
	var wg sync.WaitGroup
	t0 := time.Now()
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				k, shut := q.Get()
				if shut {
					return
				}
				q.Done(k)
				if done.Add(1) == int64(keys) {
					q.ShutDown()
				}
			}
		}()
	}
	for _, n := range names {
		q.Add(n)
	}
	wg.Wait()
	emit(map[string]any{"event": "queue", "keys": keys, "opsPerSecond": float64(3*keys) / time.Since(t0).Seconds()})
}

// ---- small helpers ----

func emit(v map[string]any) {
	b, _ := json.Marshal(v)
	fmt.Println(string(b))
}

func must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func cpuSeconds() float64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

func rssBytes() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			f := strings.Fields(line)
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb * 1024
		}
	}
	return 0
}
