package cli

import (
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"jr2.dev/boundary/controlplane/internal/kube"
)

// kubeFlags are render's flags for the pod's Kubernetes objects
// (DIR/kubernetes/): the pod's side, never this machine's.
type kubeFlags struct {
	namespace, sidecar, custodianImage, agentImage, agentContainer, configDir *string
	agentUID                                                                  *int64
}

func addKubeFlags(fs *flag.FlagSet) *kubeFlags {
	return &kubeFlags{
		namespace:      fs.String("namespace", "", ""),
		sidecar:        fs.String("sidecar", string(kube.SidecarEnvoy), ""),
		custodianImage: fs.String("custodian-image", "", ""),
		agentImage:     fs.String("agent-image", kube.DefaultAgentImage, ""),
		agentContainer: fs.String("agent-container", kube.DefaultAgentContainer, ""),
		agentUID:       fs.Int64("agent-uid", kube.DefaultAgentUID, ""),
		configDir:      fs.String("pod-config-dir", kube.DefaultConfigDir, ""),
	}
}

// options reads the flags; an error is a usage error naming the flag.
func (k *kubeFlags) options() (kube.Options, error) {
	sc, err := kube.ParseSidecar(*k.sidecar)
	if err != nil {
		return kube.Options{}, err
	}
	if *k.agentUID == 0 {
		return kube.Options{}, fmt.Errorf("--agent-uid 0: the agent runs as a non-root uid of its own; choose another (default %d)", kube.DefaultAgentUID)
	}
	return kube.Options{
		Namespace: *k.namespace, Sidecar: sc, CustodianImage: *k.custodianImage,
		AgentImage: *k.agentImage, AgentContainer: *k.agentContainer, AgentUID: *k.agentUID,
		ConfigDir: *k.configDir,
	}, nil
}

// kubeNotes writes, after a render, what the objects need that render
// does not write: each Secret of the user's the Custodian's values are
// projected from, with its keys (the convention Secret first named as
// such), and the objects' own notes. Names only: render never sees a value.
func kubeNotes(w io.Writer, set *kube.Set) {
	if set == nil {
		return
	}
	var order []string
	keys := map[string][]string{}
	convention := map[string]bool{}
	for _, v := range set.Values {
		if _, ok := keys[v.Secret]; !ok {
			order = append(order, v.Secret)
		}
		keys[v.Secret] = append(keys[v.Secret], v.Key)
		convention[v.Secret] = convention[v.Secret] || v.Convention
	}
	for _, s := range order {
		what := "your Secret"
		if convention[s] {
			what = "the pod's convention Secret, which render never writes; create it"
		}
		fmt.Fprintf(w, "controlplane render: %s/ projects the Custodian's values from Secret %s (%s) with keys: %s\n", kube.Dir, s, what, strings.Join(keys[s], ", "))
	}
	for _, n := range set.Notes {
		fmt.Fprintf(w, "controlplane render: %s\n", n)
	}
}

func newEffectorFlags() (*flag.FlagSet, *effectorFlags) {
	fs := flag.NewFlagSet("effector", flag.ContinueOnError)
	return fs, &effectorFlags{
		config:        fs.String("config", "", ""),
		out:           fs.String("out", "", ""),
		namespace:     fs.String("namespace", "", ""),
		image:         fs.String("image", kube.DefaultEffectorImg, ""),
		keySecret:     fs.String("key-secret", "", ""),
		keyKey:        fs.String("key-key", "effector-key", ""),
		secretsSecret: fs.String("secrets-secret", "", ""),
		drain:         fs.Int("drain", kube.DefaultDrain, ""),
		caFile:        fs.String("ca-file", "", ""),
	}
}

type effectorFlags struct {
	config, out, namespace, image, keySecret, keyKey, secretsSecret, caFile *string
	drain                                                                   *int
}

// effectorCmd writes the Effector's objects (kube.Effector) from its
// effector.json into DIR/kubernetes/, one per file.
func effectorCmd(args []string, stdout, stderr io.Writer) int {
	fs, f := newEffectorFlags()
	if ok, code := flags(fs, args, stdout, stderr, map[string]*string{"config": f.config, "out": f.out}); !ok {
		return code
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "controlplane effector: %v; nothing was written\n", err)
		return ExitFail
	}
	raw, err := readLimited(*f.config, 4<<20)
	if err != nil {
		return fail(fmt.Errorf("--config: %w", err))
	}
	var ca []byte
	if *f.caFile != "" {
		if ca, err = readLimited(*f.caFile, 4<<20); err != nil {
			return fail(fmt.Errorf("--ca-file: %w; name a PEM file of the certificates your https targets chain to, or drop --ca-file", err))
		}
	}
	set, err := kube.Effector(raw, kube.EffectorOptions{
		Namespace: *f.namespace, Image: *f.image, KeySecret: *f.keySecret, KeyKey: *f.keyKey,
		SecretsSecret: *f.secretsSecret, Drain: *f.drain, CA: ca,
	})
	if err != nil {
		return fail(err)
	}
	files, err := kube.Files(set)
	if err != nil {
		return fail(err)
	}
	if err := os.MkdirAll(filepath.Join(*f.out, kube.Dir), 0o755); err != nil {
		return fail(err)
	}
	for _, name := range slices.Sorted(maps.Keys(files)) {
		if err := os.WriteFile(filepath.Join(*f.out, filepath.FromSlash(name)), files[name], 0o644); err != nil {
			fmt.Fprintf(stderr, "controlplane effector: %v\n", err)
			return ExitFail
		}
	}
	fmt.Fprintf(stdout, "effector %s: %d objects in %s\n", set.Objects[0].GetName(), len(set.Objects), filepath.Join(*f.out, kube.Dir))
	for _, v := range set.Values {
		fmt.Fprintf(stderr, "controlplane effector: the Deployment projects %s from your Secret %s, key %s; create it (render never writes a value)\n", v.Held, v.Secret, v.Key)
	}
	return ExitOK
}
