package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/leaderrun/leaderrun/config"
	"github.com/leaderrun/leaderrun/internal/testenv/citest"
	"github.com/leaderrun/leaderrun/internal/testenv/kubetest"
)

// manifestDir is packaging/kubernetes.
const manifestDir = "../packaging/kubernetes"

// manifestObject is one document of a manifest: as the API's types read
// it, strictly, and as JSON, as the server is sent it.
type manifestObject struct {
	file string
	obj  runtime.Object
	json []byte
}

// manifestScheme knows the API groups of the manifests' kinds (the
// clientset's scheme would link every API group into this test binary,
// which the scripts run as leaderrun).
var manifestScheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, appsv1.AddToScheme, rbacv1.AddToScheme, policyv1.AddToScheme} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return s
}()

// readManifests reads every document of packaging/kubernetes/*.yaml with
// its namespace set to ns, decoded strictly (an unknown or repeated field
// is an error).
func readManifests(t *testing.T, ns string) []manifestObject {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(manifestDir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in %s: %v", manifestDir, err)
	}
	strict := serializer.NewCodecFactory(manifestScheme, serializer.EnableStrict).UniversalDeserializer()
	var objs []manifestObject
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		b = bytes.ReplaceAll(b, []byte("namespace: default"), []byte("namespace: "+ns))
		docs := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
		for {
			doc, err := docs.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			js, err := utilyaml.ToJSON(doc)
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if string(js) == "null" {
				continue // a document of comments alone
			}
			obj, _, err := strict.Decode(js, nil, nil)
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			objs = append(objs, manifestObject{filepath.Base(f), obj, js})
		}
	}
	return objs
}

// applyManifests creates the objects of packaging/kubernetes's files (of
// only those named, if any) in namespace ns, with the server's strict
// field validation, and returns them.
func applyManifests(t *testing.T, srv *kubetest.Server, ns string, only ...string) []manifestObject {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	var objs []manifestObject
	for _, m := range readManifests(t, ns) {
		if len(only) > 0 && !slices.Contains(only, m.file) {
			continue
		}
		if _, err := srv.Admin(ctx, "POST", resourcePath(t, m.obj, ns)+"?fieldValidation=Strict", json.RawMessage(m.json)); err != nil {
			t.Fatalf("%s: the API server refused it: %v", m.file, err)
		}
		objs = append(objs, m)
	}
	return objs
}

// resourcePath is where the server creates objects of obj's kind in
// namespace ns.
func resourcePath(t *testing.T, obj runtime.Object, ns string) string {
	t.Helper()
	gvk := obj.GetObjectKind().GroupVersionKind()
	plural := map[string]string{
		"ServiceAccount": "serviceaccounts", "Role": "roles", "RoleBinding": "rolebindings",
		"Deployment": "deployments", "Service": "services", "PodDisruptionBudget": "poddisruptionbudgets",
	}[gvk.Kind]
	if plural == "" {
		t.Fatalf("no path here for the kind %s: add it", gvk.Kind)
	}
	if gvk.Group == "" {
		return "/api/" + gvk.Version + "/namespaces/" + ns + "/" + plural
	}
	return "/apis/" + gvk.Group + "/" + gvk.Version + "/namespaces/" + ns + "/" + plural
}

// TestKubeManifests applies packaging/kubernetes/*.yaml in a namespace of
// its own (each document decoded strictly by the API's types, and created
// with the server's strict field validation), then runs three replicas as
// the Deployment's pods would run them: Pod objects made from its
// template, the container's command and environment (fieldRefs and
// $(VAR)s expanded), the ServiceAccount's token (a TokenRequest, as the
// kubelet's). They lead with exactly the Role's verbs, every replica
// answers the readiness probe, and the Service's selector selects the
// leader's pod alone, through a graceful hand-off.
func TestKubeManifests(t *testing.T) {
	srv := kubetest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*waitLimit)
	defer cancel()
	ns, err := srv.CreateNamespace(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var (
		deploy  *appsv1.Deployment
		service *corev1.Service
		role    *rbacv1.Role
	)
	for _, m := range applyManifests(t, srv, ns) {
		switch o := m.obj.(type) {
		case *appsv1.Deployment:
			deploy = o
		case *corev1.Service:
			service = o
		case *rbacv1.Role:
			role = o
		}
	}
	if deploy == nil || service == nil || role == nil {
		t.Fatal("want a Deployment, a Service and a Role in the manifests")
	}
	checkDeployment(t, deploy)

	token, err := srv.ServiceAccountToken(ctx, ns, deploy.Spec.Template.Spec.ServiceAccountName)
	if err != nil {
		t.Fatal(err)
	}
	awaitAllowed(t, srv, token, "/apis/coordination.k8s.io/v1/namespaces/"+ns+"/leases", "/api/v1/namespaces/"+ns+"/pods")

	k := newKubeReplicas(t, srv, token, ns)
	var selector []string
	for key, value := range service.Spec.Selector {
		selector = append(selector, key+"="+value)
	}
	slices.Sort(selector)
	k.label = strings.Join(selector, ",")
	k.create = func(ctx context.Context, pod string) error {
		tmpl := deploy.Spec.Template
		obj := map[string]any{"apiVersion": "v1", "kind": "Pod",
			"metadata": map[string]any{"name": pod, "labels": tmpl.Labels}, "spec": tmpl.Spec}
		_, err := srv.Admin(ctx, "POST", "/api/v1/namespaces/"+ns+"/pods", obj)
		return err
	}
	ctr := deploy.Spec.Template.Spec.Containers[0]
	readiness := map[string]string{} // pod → the readiness probe's URL
	k.spec = func(pod string) (args, env []string) {
		env = containerEnv(t, ctr, pod, ns)
		// One host: each replica's HTTP port is a free one, not the
		// container's.
		port, err := citest.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		env = append(env, "LEADERRUN_HTTP_ADDR="+addr, "KUBECONFIG="+filepath.Join(k.dir, "kubeconfig"))
		readiness[pod] = "http://" + addr + ctr.ReadinessProbe.HTTPGet.Path
		// The command is leaderrun's options; the program is a sleep.
		return append(slices.Clone(ctr.Command[1:]), "sleep", "1000"), env
	}
	for i := range int(*deploy.Spec.Replicas) {
		k.start(fmt.Sprintf("%s-7d9f-%d", deploy.Name, i))
	}
	old := k.leader()
	k.awaitLabelled(old.pod)
	for pod, url := range readiness {
		awaitHTTP(t, pod, url)
	}
	stop := k.poll()
	old.cmd.Process.Signal(syscall.SIGTERM)
	next := k.leader(old)
	k.awaitLabelled(next.pod)
	stop()
	k.neverTwice()
}

// checkDeployment checks what a rolling update without an outage needs of
// the Deployment.
func checkDeployment(t *testing.T, d *appsv1.Deployment) {
	t.Helper()
	s := d.Spec.Strategy
	if s.Type != appsv1.RollingUpdateDeploymentStrategyType || s.RollingUpdate == nil ||
		s.RollingUpdate.MaxSurge == nil || *s.RollingUpdate.MaxSurge != intstr.FromInt32(1) ||
		s.RollingUpdate.MaxUnavailable == nil || *s.RollingUpdate.MaxUnavailable != intstr.FromInt32(0) {
		t.Errorf("strategy %+v: want RollingUpdate with maxSurge 1 and maxUnavailable 0", s)
	}
	ctr := d.Spec.Template.Spec.Containers[0]
	if p := ctr.ReadinessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/healthz" {
		t.Errorf("readiness probe %+v: want /healthz (every replica is ready to lead)", p)
	}
	// The kill grace, the label's removal (1 s) and the release (5 s).
	need := config.DefaultKillGrace + 6*time.Second
	if g := d.Spec.Template.Spec.TerminationGracePeriodSeconds; g == nil || time.Duration(*g)*time.Second < need {
		t.Errorf("terminationGracePeriodSeconds %v: want at least %v", g, need)
	}
}

// containerEnv is the container's environment in pod of namespace ns, as
// the kubelet makes it: fieldRefs to the pod's name and namespace, and
// $(VAR) of the variables before.
func containerEnv(t *testing.T, ctr corev1.Container, pod, ns string) []string {
	t.Helper()
	vars := map[string]string{}
	ref := regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)
	var env []string
	for _, e := range ctr.Env {
		v := e.Value
		switch {
		case e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name":
			v = pod
		case e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace":
			v = ns
		case e.ValueFrom != nil:
			t.Fatalf("env %s: no value here for %+v: add it", e.Name, e.ValueFrom)
		default:
			v = ref.ReplaceAllStringFunc(v, func(m string) string {
				if x, ok := vars[m[2:len(m)-1]]; ok {
					return x
				}
				return m
			})
		}
		vars[e.Name] = v
		if e.Name != "LEADERRUN_HTTP_ADDR" {
			env = append(env, e.Name+"="+v)
		}
	}
	return env
}

// awaitAllowed waits until the user of token may GET every one of paths:
// the server's authorizer takes a moment to see a new RoleBinding.
func awaitAllowed(t *testing.T, srv *kubetest.Server, token string, paths ...string) {
	t.Helper()
	for _, p := range paths {
		var err error
		for deadline := time.Now().Add(waitLimit); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
			_, err = srv.Request(ctx, token, "GET", p, nil)
			cancel()
			if err == nil {
				break
			}
		}
		if err != nil {
			t.Fatalf("the ServiceAccount may not GET %s: %v", p, err)
		}
	}
}

// awaitHTTP waits until url answers 200.
func awaitHTTP(t *testing.T, pod, url string) {
	t.Helper()
	var last string
	for deadline := time.Now().Add(waitLimit); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		resp, err := http.Get(url)
		if err != nil {
			last = err.Error()
			continue
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			return
		}
		last = resp.Status
	}
	t.Fatalf("%s's readiness probe %s: %s, want 200 OK", pod, url, last)
}
