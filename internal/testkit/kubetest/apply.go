package kubetest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"
)

// Namespace creates a namespace for t alone, named after it, with its
// `default` ServiceAccount, and returns its name. It is not deleted: no
// controller would finalize it, and the server goes with the test binary.
func (s *Server) Namespace(t testing.TB) string {
	t.Helper()
	s.nsMu.Lock()
	s.nsN++
	n := s.nsN
	s.nsMu.Unlock()
	name := "t" + strconv.Itoa(n) + "-" + strings.Trim(regexp.MustCompile(`[^a-z0-9]+`).ReplaceAllString(strings.ToLower(t.Name()), "-"), "-")
	if len(name) > 63 {
		name = strings.TrimRight(name[:63], "-")
	}
	if err := s.EnsureNamespace(context.Background(), name); err != nil {
		t.Fatal(err)
	}
	return name
}

// EnsureNamespace creates namespace name if it does not exist, and its
// `default` ServiceAccount, which a controller-manager would create and
// the ServiceAccount admission plugin needs for every Pod.
func (s *Server) EnsureNamespace(ctx context.Context, name string) error {
	_, err := s.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", name, err)
	}
	_, err = s.Client.CoreV1().ServiceAccounts(name).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create ServiceAccount %s/default: %w", name, err)
	}
	return nil
}

// Apply applies doc, one object in YAML or JSON, server-side with field
// manager FieldManager and without forcing conflicts, as `kubectl apply
// --server-side --field-manager=jr2` does, and returns the object the
// server stored. The server's refusal is the error, as it said it.
func (s *Server) Apply(ctx context.Context, doc []byte) (*unstructured.Unstructured, error) {
	u, err := Decode(doc)
	if err != nil {
		return nil, err
	}
	ri, err := s.Resource(ctx, u)
	if err != nil {
		return nil, err
	}
	return ri.Patch(ctx, u.GetName(), types.ApplyYAMLPatchType, doc, metav1.PatchOptions{FieldManager: FieldManager})
}

// ApplyDir applies each *.yaml, *.yml and *.json file of dir (one object
// each), in name order, and returns what the server stored, in the same
// order.
func (s *Server) ApplyDir(ctx context.Context, dir string) ([]*unstructured.Unstructured, error) {
	files, err := ObjectFiles(dir)
	if err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		u, err := s.Apply(ctx, b)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", filepath.Base(f), err)
		}
		out = append(out, u)
	}
	return out, nil
}

// Get reads back from the server the object u names (its apiVersion,
// kind, namespace and name).
func (s *Server) Get(ctx context.Context, u *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	ri, err := s.Resource(ctx, u)
	if err != nil {
		return nil, err
	}
	return ri.Get(ctx, u.GetName(), metav1.GetOptions{})
}

// Resource is the dynamic client for u's kind, in u's namespace if the
// kind is namespaced.
func (s *Server) Resource(ctx context.Context, u *unstructured.Unstructured) (dynamic.ResourceInterface, error) {
	gvk := u.GroupVersionKind()
	m, err := s.Mapper.RESTMappingWithContext(ctx, gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", gvk, u.GetName(), err)
	}
	if m.Scope.Name() == "namespace" {
		return s.Dynamic.Resource(m.Resource).Namespace(u.GetNamespace()), nil
	}
	return s.Dynamic.Resource(m.Resource), nil
}

// Decode reads one object in YAML or JSON.
func Decode(doc []byte) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	if err := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(doc), 4096).Decode(&u.Object); err != nil {
		return nil, fmt.Errorf("decode object: %w", err)
	}
	if u.GetKind() == "" || u.GetAPIVersion() == "" || u.GetName() == "" {
		return nil, fmt.Errorf("decode object: no apiVersion, kind or metadata.name")
	}
	return u, nil
}

// ObjectFiles are dir's *.yaml, *.yml and *.json files (not its
// subdirectories'), in name order: what `kubectl apply -f dir/` reads.
func ObjectFiles(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var files []string
	for _, e := range ents {
		switch filepath.Ext(e.Name()) {
		case ".yaml", ".yml", ".json":
			if !e.IsDir() {
				files = append(files, filepath.Join(dir, e.Name()))
			}
		}
	}
	sort.Strings(files)
	if len(files) == 0 {
		return nil, fmt.Errorf("%s holds no *.yaml, *.yml or *.json file", dir)
	}
	return files, nil
}

// Run runs line with bash in dir as a user at a shell would, with the
// pinned kubectl first on PATH, KUBECONFIG naming the server (its context
// in no namespace: "default"), and HOME (kubectl's cache) a directory of
// t's. It returns what the line printed (stdout and stderr) and its error
// (an *exec.ExitError for a non-zero exit).
func (s *Server) Run(t testing.TB, dir, line string) (string, error) {
	t.Helper()
	return s.run(t, dir, s.Kubeconfig, line)
}

// RunIn is Run with kubectl's context in namespace ns, as a user's whose
// kubeconfig names it: a line that names no namespace works in ns.
func (s *Server) RunIn(t testing.TB, dir, ns, line string) (string, error) {
	t.Helper()
	kc, err := clientcmd.LoadFromFile(s.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	kc.Contexts[kc.CurrentContext].Namespace = ns
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return s.run(t, dir, path, line)
}

func (s *Server) run(t testing.TB, dir, kubeconfig, line string) (string, error) {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(s.Tools.Kubectl, filepath.Join(bin, "kubectl")); err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	cmd := exec.Command("bash", "-c", line)
	cmd.Dir = dir
	cmd.Env = []string{
		"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH"),
		"HOME=" + home,
		"KUBECONFIG=" + kubeconfig,
		"KUBECACHEDIR=" + filepath.Join(home, "cache"),
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}
