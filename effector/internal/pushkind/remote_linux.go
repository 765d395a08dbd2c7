package pushkind

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"jr2.dev/boundary/effector/internal/config"
	"jr2.dev/boundary/effector/internal/gitrun"
	"jr2.dev/boundary/effector/internal/oserr"
	"jr2.dev/boundary/effector/internal/wire"
)

// writeCredentials copies what the remote phases read into cred/, mode
// 0600: the entry's ssh key and known_hosts, its token, its signing key,
// and the trust bundle. Only the bytes config read at start are written.
func (r *runner) writeCredentials() error {
	files := map[string][]byte{}
	for _, f := range []string{config.GitIdentity, config.GitKnownHosts, config.GitPassword} {
		if b, ok := r.p.entry.Files[f]; ok {
			files[f] = b
		}
	}
	switch r.p.sign {
	case config.SignSSH:
		if b, ok := r.p.entry.Files[config.GitSignIdentity]; ok {
			files[config.GitSignIdentity] = b
		}
	case config.SignGPG:
		if b, ok := r.p.entry.Files[config.GitSignGPG]; ok {
			files[config.GitSignGPG] = b
		}
	}
	if r.k.o.CAFile != "" && r.p.remote.Transport == wire.TransportHTTPS {
		bundle, err := trustBundle(r.k.o.CAFile)
		if err != nil {
			return err
		}
		files["ca.pem"] = bundle
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(r.cred, name), b, 0o600); err != nil {
			return fmt.Errorf("the push's credentials could not be copied into its scratch (%s)", oserr.Why(err))
		}
	}
	return nil
}

// systemBundles are where a distribution keeps its roots, as Go looks.
var systemBundles = []string{
	"/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt", "/etc/ssl/ca-bundle.pem",
	"/etc/pki/tls/cacert.pem", "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem", "/etc/ssl/cert.pem",
}

// trustBundle is the system's roots and JR2_CA_FILE's, one PEM file: git's
// http.sslCAInfo replaces the system's bundle, so both go in it.
func trustBundle(caFile string) ([]byte, error) {
	extra, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("%s could not be read (%s)", config.EnvCAFile, oserr.Why(err))
	}
	var b []byte
	for _, p := range systemBundles {
		if sys, err := os.ReadFile(p); err == nil {
			b = append(append(b, sys...), '\n')
			break
		}
	}
	return append(b, extra...), nil
}

// remote is the config and env of the phases that reach the remote: the
// one transport the slot's url names, and its credentials.
func (r *runner) remote() (args, env []string) {
	switch r.p.remote.Transport {
	case wire.TransportSSH:
		ssh := []string{r.k.progs["ssh"], "-F", "/dev/null", "-E", filepath.Join(r.tmp, "ssh.log"),
			"-o", "IdentitiesOnly=yes", "-o", "IdentityFile=" + filepath.Join(r.cred, config.GitIdentity),
			"-o", "IdentityAgent=none", "-o", "StrictHostKeyChecking=yes",
			"-o", "UserKnownHostsFile=" + filepath.Join(r.cred, config.GitKnownHosts), "-o", "GlobalKnownHostsFile=/dev/null",
			"-o", "UpdateHostKeys=no", "-o", "BatchMode=yes", "-o", "ControlMaster=no", "-o", "ControlPath=none",
			"-o", "ProxyCommand=none", "-o", "ProxyJump=none", "-o", "PermitLocalCommand=no", "-o", "ForwardAgent=no",
			"-o", "ClearAllForwardings=yes", "-o", "PKCS11Provider=none", "-o", "SecurityKeyProvider=internal"}
		env = []string{gitrun.Allow("ssh"), "GIT_SSH_COMMAND=" + shellJoin(ssh), "GIT_SSH_VARIANT=ssh"}
	case wire.TransportHTTPS:
		host := r.p.remote.Host
		if r.p.remote.Port != 0 {
			host = fmt.Sprintf("%s:%d", host, r.p.remote.Port)
		}
		helper := shellJoin([]string{r.k.o.Self, "credential", "--password-file", filepath.Join(r.cred, config.GitPassword),
			"--username", r.p.entry.Username, "--host", host})
		// "!…": a shell snippet git appends the action to.
		env = []string{gitrun.Allow("https")}
		args = []string{"-c", "credential.helper=!" + helper, "-c", "credential.useHttpPath=false"}
		if r.k.o.CAFile != "" {
			args = append(args, "-c", "http.sslCAInfo="+filepath.Join(r.cred, "ca.pem"))
		}
	}
	return args, env
}

// shellJoin quotes each word for sh: git runs GIT_SSH_COMMAND and a
// credential helper through the shell.
func shellJoin(words []string) string {
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}

// sshLine is ssh's last line of its own log, or "".
func (r *runner) sshLine() string {
	b, err := os.ReadFile(filepath.Join(r.tmp, "ssh.log"))
	if err != nil || len(bytes.TrimSpace(b)) == 0 {
		return ""
	}
	return gitrun.LastLine(b)
}

// unreachable is the reason of a remote phase that failed before git
// could speak with the remote.
func (r *runner) unreachable(stderr []byte) string {
	if l := r.sshLine(); l != "" {
		return r.clean("the remote could not be reached: ssh: " + strings.TrimPrefix(l, "ssh: ") + " (git: " + gitrun.Reason(stderr) + ")")
	}
	line := gitrun.Reason(stderr)
	if strings.Contains(line, "Authentication failed") || strings.Contains(line, "could not read Username") || strings.Contains(line, "403") {
		return r.clean("the remote refused the credential: " + line)
	}
	return r.clean("the remote could not be reached: " + line)
}

// push sends tip to the slot's ref and reads git's porcelain answer.
func (r *runner) push(ctx context.Context, tip string) wire.Outcome {
	key := r.phase("push")
	defer r.settle(key)
	args, env := r.remote()
	args = append(args, "push", "--porcelain", "--no-verify", "--", r.p.push.Slot.URL, tip+":"+r.p.push.Ref)
	out, stderr, err := r.git(ctx, gitCall{key: key, cred: true, args: args, env: env})
	if ctx.Err() != nil {
		return rejected(StagePush, fmt.Sprintf("the push ran past its %d ms while sending; the remote may hold the update", r.p.timeout.Milliseconds()))
	}
	flag, summary, found := porcelain(out, r.p.push.Ref)
	switch {
	case found && flag == '!' && (strings.Contains(summary, "non-fast-forward") || strings.Contains(summary, "fetch first")):
		return rejected(StagePush, fmt.Sprintf("the remote refused a non-fast-forward update of %s; the pinned commit does not hold the remote's tip", r.p.push.Ref))
	case found && flag == '!':
		return rejected(StagePush, r.clean(fmt.Sprintf("the remote refused the update of %s: %s", r.p.push.Ref, summary)))
	case found && err == nil:
		return wire.Outcome{Kind: wire.OutcomePushed, Commit: tip, Ref: r.p.push.Ref}
	case err == nil:
		return rejected(StagePush, "git push gave no status for the ref; the remote may hold the update")
	}
	return rejected(StagePush, r.unreachable(stderr))
}

// porcelain finds the status line of ref in `git push --porcelain`:
// "<flag>\t<from>:<to>\t<summary>".
func porcelain(out []byte, ref string) (flag byte, summary string, found bool) {
	for _, line := range strings.Split(string(out), "\n") {
		parts := strings.SplitN(line, "\t", 3)
		if len(parts) == 3 && len(parts[0]) == 1 && strings.HasSuffix(parts[1], ":"+ref) {
			return parts[0][0], parts[2], true
		}
	}
	return 0, "", false
}
