package kube

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
)

// Directories of the rendered directory that hold objects.
const (
	// Dir holds one object per file: kubectl apply --server-side
	// --field-manager=jr2 -f DIR/kubernetes/ is the whole deployment.
	Dir = "kubernetes"
	// PatchDir holds the pod-template patch, which is not an object and
	// so is never under Dir.
	PatchDir = "kubernetes-patch"
)

// FileName is an object's file: <lower-case kind>-<name>.yaml.
func FileName(obj Object) string {
	return strings.ToLower(obj.GetObjectKind().GroupVersionKind().Kind) + "-" + obj.GetName() + ".yaml"
}

// PatchFile is the pod-template patch's file under PatchDir.
func PatchFile(pod string) string { return "pod-template-" + pod + ".yaml" }

// Marshal writes one object as YAML (yaml.go): the fields of its JSON
// form (the API's own field names), leaving out the fields that would
// only say "unset" (a null, an empty status), so the file names exactly
// the fields jr2 owns.
func Marshal(v any) ([]byte, error) { return yamlOf(v) }

// Files are the set's files, relative to the rendered directory: each
// object under Dir, the patch under PatchDir. An object over
// MaxObjectBytes — as the API server counts it (Size) or as written — is
// refused, naming it and the fix.
func Files(set *Set) (map[string][]byte, error) {
	// Each object's YAML on a goroutine of its own (a pod of 400 targets
	// writes ~1.6 MB of it, a tenth of a render): the objects are
	// independent and read-only here.
	// The patch is one of them: it is the Pod's spec again, as large as
	// the Pod, and written after the others it was the last tenth of the
	// YAML on one core.
	yamls := make([][]byte, len(set.Objects)+1)
	errs := make([]error, len(set.Objects)+1)
	var wg sync.WaitGroup
	for i, obj := range set.Objects {
		wg.Add(1)
		go func() {
			defer wg.Done()
			yamls[i], errs[i] = Marshal(obj)
		}()
	}
	if set.Patch != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			yamls[len(set.Objects)], errs[len(set.Objects)] = Marshal(set.Patch)
		}()
	}
	wg.Wait()
	out := map[string][]byte{}
	for i, obj := range set.Objects {
		b, err := yamls[i], errs[i]
		if err != nil {
			return nil, fmt.Errorf("%s: %w", FileName(obj), err)
		}
		name := Dir + "/" + FileName(obj)
		n, err := Size(obj)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		n = max(n, len(b)) // under the limit as the server counts it, and as written
		if n > MaxObjectBytes {
			return nil, fmt.Errorf("%s would be %d bytes, over Kubernetes' %d-byte object limit, and the API server would refuse it; %s", name, n, MaxObjectBytes, tooBig(obj))
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("%s: two objects of one kind and name (a bug in kube)", name)
		}
		out[name] = b
	}
	if set.Patch != nil {
		if err := errs[len(set.Objects)]; err != nil {
			return nil, err
		}
		out[PatchDir+"/"+PatchFile(set.Patch.Spec.Template.Labels[LabelHeldPod])] = yamls[len(set.Objects)]
	}
	return out, nil
}

// Size is an object's size as this package limits it: a ConfigMap's or a
// Secret's data, each key and value, any other object's JSON encoding. The
// API server (1.37.2's validation) refuses a ConfigMap or Secret whose
// values alone total more than 1 MiB; counting the keys too is stricter,
// so an object Size passes the server passes. The YAML file may be a little larger
// (a JSON file's quotes escaped, a PEM's lines indented).
func Size(obj Object) (int, error) {
	switch v := obj.(type) {
	case *corev1.ConfigMap:
		return dataSize(v.Data, v.BinaryData), nil
	case *corev1.Secret:
		return dataSize(nil, v.Data), nil
	}
	b, err := json.Marshal(obj)
	return len(b), err
}

func dataSize(text map[string]string, bin map[string][]byte) int {
	n := 0
	for k, v := range text {
		n += len(k) + len(v)
	}
	for k, v := range bin {
		n += len(k) + len(v)
	}
	return n
}

// tooBig is the fix for an object over the limit.
func tooBig(obj Object) string {
	switch obj.GetLabels()[LabelComponent] {
	case ComponentConfig:
		return "envoy.json grows with each bound target and custodian.json with each secret: hold fewer secrets in this pod, or bind fewer hosts (split the secrets across pods)"
	case ComponentTrust:
		return "the trust files hold the system roots twice and --ca-bundle three times: pass a smaller --ca-bundle (only the roots the pod needs)"
	case ComponentPod:
		return "the Pod grows with harness.env and the value items: hold fewer secrets in this pod"
	}
	return "split what this object holds"
}
