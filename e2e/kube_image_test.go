package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/internal/testenv/citest"
	"github.com/leaderrun/leaderrun/internal/testenv/kubetest"
)

// podScript runs as the container runtime would: in the mount and PID
// namespace that unshare made ($0 is PID 1 of the new PID namespace), it
// mounts /proc and /dev and the service account's directory into the
// image's root filesystem $1 (from $2, read-only), then runs the rest as
// user 65532 chrooted there.
const podScript = `set -e
r=$1 sa=$2
shift 2
mkdir -p "$r/proc" "$r/dev" "$r/var/run/secrets/kubernetes.io/serviceaccount"
mount -t proc proc "$r/proc"
mount --rbind /dev "$r/dev"
mount --bind "$sa" "$r/var/run/secrets/kubernetes.io/serviceaccount"
mount -o remount,bind,ro "$r/var/run/secrets/kubernetes.io/serviceaccount"
exec chroot --userspec=65532:65532 "$r" "$@"`

// TestKubeImageRunsAsAPod builds the image's root filesystem with
// packaging/rootfs.sh (as packaging/Dockerfile does) and runs leaderrun in
// it as a pod runs it: user 65532, chrooted, in a mount and PID namespace of
// its own (PID 1 there), with the pod's environment (POD_NAME, the
// Service's KUBERNETES_SERVICE_HOST and _PORT) and its service account's
// token, CA certificate and namespace mounted where the kubelet mounts
// them; the Role is rbac.yaml's. With --store k8s:// (the namespace is the
// pod's) it leads, and labels its pod.
func TestKubeImageRunsAsAPod(t *testing.T) {
	if os.Geteuid() != 0 {
		citest.Missing(t, "runs the image in namespaces of its own: needs root")
	}
	dockerfile, err := os.ReadFile("../packaging/Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"sh packaging/rootfs.sh /rootfs", "COPY --from=build /rootfs/ /"} {
		if !strings.Contains(string(dockerfile), want) {
			t.Fatalf("packaging/Dockerfile does not say %q: it lays out the image otherwise than packaging/rootfs.sh, which this test runs", want)
		}
	}
	srv := kubetest.Start(t) // first: make test skips here
	dir := t.TempDir()
	rootfs := filepath.Join(dir, "rootfs")
	build := exec.Command("sh", "../packaging/rootfs.sh", rootfs)
	build.Env = append(os.Environ(), "VERSION=test")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("packaging/rootfs.sh: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*waitLimit)
	defer cancel()
	ns, err := srv.CreateNamespace(ctx)
	if err != nil {
		t.Fatal(err)
	}
	applyManifests(t, srv, ns, "rbac.yaml")
	const pod = "relay-7d9f-0"
	if err := srv.CreatePod(ctx, ns, pod, map[string]string{"app": "relay"}); err != nil {
		t.Fatal(err)
	}
	token, err := srv.ServiceAccountToken(ctx, ns, "leaderrun")
	if err != nil {
		t.Fatal(err)
	}
	awaitAllowed(t, srv, token, "/apis/coordination.k8s.io/v1/namespaces/"+ns+"/leases", "/api/v1/namespaces/"+ns+"/pods")
	ca, err := srv.CACert()
	if err != nil {
		t.Fatal(err)
	}
	sa := filepath.Join(dir, "serviceaccount")
	if err := os.Mkdir(sa, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{"token": token, "ca.crt": string(ca), "namespace": ns} {
		if err := os.WriteFile(filepath.Join(sa, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	logPath := filepath.Join(dir, "pod.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	// The image's entrypoint with the manifest's options; the program is
	// leaderrun's own watch, the one long-running program in the image.
	c := exec.Command("unshare", "--mount", "--pid", "--fork", "--propagation", "private",
		"sh", "-c", podScript, "pod", rootfs, sa,
		"/leaderrun", "--name", "relay", "--store", "k8s://", "--identity", pod,
		"--leader-label", "leaderrun/role=leader", "--",
		"/leaderrun", "watch", "--store", "k8s://", "relay")
	c.Env = []string{
		"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOSTNAME=" + pod, "POD_NAME=" + pod,
		"KUBERNETES_SERVICE_HOST=127.0.0.1", "KUBERNETES_SERVICE_PORT=" + srv.Port(),
		"LEADERRUN_STORE=sqlite:/var/lib/leaderrun/leaderrun.db", // the image's ENV; --store wins
	}
	c.Stdout, c.Stderr = logf, logf
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { c.Wait(); close(done) }()
	t.Cleanup(func() {
		syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
		if pid1 := firstChild(c.Process.Pid); pid1 != 0 {
			syscall.Kill(pid1, syscall.SIGKILL) // the namespace dies with its PID 1
		}
		<-done
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("the pod's log:\n%s", b)
		}
	})
	awaitPodLog := func(re string) {
		t.Helper()
		rx := regexp.MustCompile(re)
		for deadline := time.Now().Add(waitLimit); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if b, _ := os.ReadFile(logPath); rx.Match(b) {
				return
			}
			select {
			case <-done:
				t.Fatalf("the pod ended before its log matched %s", re)
			default:
			}
		}
		t.Fatalf("the pod's log: no match for %s within %v", re, waitLimit)
	}
	// The namespace is the pod's; the server is the Service's address.
	awaitPodLog(`msg=campaigning .*store="k8s://` + ns + ` \(https://127\.0\.0\.1:` + srv.Port() + `\)"`)
	awaitPodLog(`msg="child started"`)
	srv.AwaitLabelled(t, ns, "leaderrun/role=leader", pod)
	// The command, leaderrun's watch, reads the Lease in the pod too.
	awaitPodLog(`(leader|elected) +name=relay holder=` + pod)

	pid1 := firstChild(c.Process.Pid)
	status, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid1), "status"))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^Uid:\s+65532\s`).Match(status) {
		t.Errorf("the pod's PID 1 (pid %d here) does not run as 65532:\n%s", pid1, status)
	}
	if nspid := regexp.MustCompile(`(?m)^NSpid:.*\s1$`); !nspid.Match(status) {
		t.Errorf("leaderrun is not PID 1 of its PID namespace:\n%s", status)
	}
}
