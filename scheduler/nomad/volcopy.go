package nomad

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/hashicorp/nomad/api"

	"github.com/svchost/svc/internal/errcode"
	jobtemplates "github.com/svchost/svc/jobs-templates"
	"github.com/svchost/svc/scheduler"
)

// Copies of an app's volume to and from the svc server (backups and
// restores): each is a batch job of one group and task (copyGroup) placed
// on the node that holds the volume's host volume (a constraint on
// ${node.unique.id}), which asks for the volume as the app's jobs do
// (read-write). With the exec driver the task mounts it at copyMount in
// its task directory (read-only for a copy out); raw_exec mounts nothing and is told the
// volume's directory. The task finds it in $SVC_VOLUME_DIR either way. Its
// time limit is the runtime's BuildTimeout; the job is purged and its
// artifact removed whatever the outcome.

// copyGroup is a volume copy job's one group and task.
const copyGroup = "copy"

// copyMount is where an exec copy task mounts the volume, relative to its
// task directory; copyVolume is the group's name for it.
const (
	copyMount  = "local/volume"
	copyVolume = "data"
)

// copyOutScript packs the volume (GNU tar stores hard links as files, so
// that the upload is a tree) and PUTs it to $SVC_UPLOAD_URL with curl.
const copyOutScript = `set -e
cd "$SVC_VOLUME_DIR"
h=
if tar --version 2>/dev/null | grep -q GNU; then h=--hard-dereference; fi
tar $h -czf "$NOMAD_TASK_DIR/svc-volume.tar.gz" .
curl -fsS --retry 3 -H 'Content-Type: application/gzip' -T "$NOMAD_TASK_DIR/svc-volume.tar.gz" "$SVC_UPLOAD_URL"`

// copyInScript replaces the volume's contents with the archive at
// $SVC_ARCHIVE: unpacked first inside the volume under a hidden name (a
// failure up to there leaves the old data as it was), then every old entry
// moved aside, the new ones moved in, and the old removed.
const copyInScript = `set -e
v="$SVC_VOLUME_DIR"
new="$v/.svc-restore-new"
old="$v/.svc-restore-old"
rm -rf "$new" "$old"
mkdir "$new" "$old"
tar --no-same-owner -xzf "$SVC_ARCHIVE" -C "$new"
for f in "$v"/* "$v"/.[!.]* "$v"/..?*; do
  [ -e "$f" ] || [ -L "$f" ] || continue
  case "$f" in "$new"|"$old") continue ;; esac
  mv "$f" "$old/"
done
for f in "$new"/* "$new"/.[!.]* "$new"/..?*; do
  [ -e "$f" ] || [ -L "$f" ] || continue
  mv "$f" "$v/"
done
rmdir "$new"
rm -rf "$old"`

// CopyVolumeOut copies an app's volume from its Nomad client into dst, a
// directory of the svc server (made if missing; it must hold nothing the
// volume does): a batch job on the volume's node packs the volume, read
// only, and PUTs it to a signed upload URL of the artifact store, which
// checks it as it does a build's upload; it is then unpacked into dst
// through an os.Root (unpackTree: nothing outside dst, no links out, size
// capped). A volume no deploy made yet is NOT_FOUND; a copy that fails is
// ADAPTER_FAILED with the task's log tail.
func (r *Runtime) CopyVolumeOut(ctx context.Context, appID, volume, dst string) error {
	hv, err := r.locateVolume(ctx, appID, volume)
	if err != nil {
		return err
	}
	id := copyID("volout")
	timeout := r.cfg.BuildTimeout
	env := map[string]string{"SVC_UPLOAD_URL": r.cfg.Artifacts.SignedUploadURL(r.cfg.ArtifactBaseURL, id, timeout+time.Hour)}
	defer func() { _ = r.cfg.Artifacts.Remove(id) }()
	if err := r.runCopy(ctx, r.copyJob(id, appID, hv, true, nil, env, copyOutScript), volume, timeout); err != nil {
		return err
	}
	// The upload may have reached another svc server: Ensure fetches it.
	if _, err := r.cfg.Artifacts.Ensure(ctx, scheduler.Artifact{ID: id}); errcode.CodeOf(err) == errcode.AdapterUnavailable {
		return err
	} else if err != nil {
		return errcode.New(errcode.AdapterFailed, "the copy of volume %s succeeded but its upload never reached svc at %s", volume, r.cfg.ArtifactBaseURL).
			WithRemedy("check that Nomad clients reach svc at the nomad adapter's artifact_url and have tar and curl")
	}
	if err := r.cfg.Artifacts.unpack(id, dst); err != nil {
		return errcode.Wrap(err, errcode.AdapterFailed, "the copy of volume %s of app %s was refused: %v", volume, appID, err)
	}
	return nil
}

// CopyVolumeIn replaces the contents of an app's volume on its Nomad
// client with the tree at src, a directory of the svc server: src is
// packed into the artifact store, and a batch job on the volume's node
// downloads it (its artifact block, checksummed, at a signed URL) and
// swaps it in (copyInScript), so that a failure before the swap leaves
// the old data. The app's running allocation is not told: the caller
// restarts it.
func (r *Runtime) CopyVolumeIn(ctx context.Context, appID, volume, src string) error {
	hv, err := r.locateVolume(ctx, appID, volume)
	if err != nil {
		return err
	}
	id := copyID("volin")
	timeout := r.cfg.BuildTimeout
	pub, err := r.cfg.Artifacts.Publish(scheduler.Artifact{ID: id, Dir: src})
	if err != nil {
		return fmt.Errorf("copy volume %s in: pack it: %w", volume, err)
	}
	defer func() { _ = r.cfg.Artifacts.Remove(id) }()
	art := &api.TaskArtifact{
		GetterSource:  ptr(r.cfg.Artifacts.signedURL(http.MethodGet, r.cfg.ArtifactBaseURL, id, timeout+time.Hour)),
		GetterOptions: map[string]string{"checksum": "sha256:" + pub.SHA256, "archive": "false"},
		RelativeDest:  ptr("local/"),
	}
	env := map[string]string{"SVC_ARCHIVE": "${NOMAD_TASK_DIR}/" + id + ".tar.gz"}
	return r.runCopy(ctx, r.copyJob(id, appID, hv, false, art, env, copyInScript), volume, timeout)
}

// copyID is a new copy's artifact ID (and its job's).
func copyID(kind string) string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return kind + "-" + hex.EncodeToString(b)
}

// copyJob is the batch job of a volume copy (see the comment at the top
// of this file).
func (r *Runtime) copyJob(id, appID string, hv hostVolume, readOnly bool, art *api.TaskArtifact, env map[string]string, script string) *api.Job {
	task := &api.Task{
		Name: copyGroup, Driver: r.cfg.Driver, Env: env,
		Config:    map[string]any{"command": "/bin/sh", "args": []any{"-c", script}},
		Resources: &api.Resources{CPU: ptr(250), MemoryMB: ptr(256)},
	}
	if art != nil {
		task.Artifacts = []*api.TaskArtifact{art}
	}
	if r.cfg.Driver == DriverRawExec {
		env["SVC_VOLUME_DIR"] = hv.HostPath
	} else {
		env["SVC_VOLUME_DIR"] = "${NOMAD_TASK_DIR}/volume"
		task.VolumeMounts = []*api.VolumeMount{{Volume: ptr(copyVolume), Destination: ptr(copyMount), ReadOnly: ptr(readOnly)}}
	}
	name := "svc-" + id
	job := &api.Job{
		ID: ptr(name), Name: ptr(name), Type: ptr(api.JobTypeBatch),
		Namespace: ptr(r.namespace()), Datacenters: r.cfg.Datacenters,
		Meta: map[string]string{jobtemplates.MetaManagedBy: jobtemplates.ManagedBy, jobtemplates.MetaAppID: appID},
		TaskGroups: []*api.TaskGroup{{
			Name: ptr(copyGroup), Count: ptr(1), Tasks: []*api.Task{task},
			// Asked for read-write, as the app's jobs ask (Nomad places a
			// read-only request only on a volume with the
			// single-node-reader-only capability, which svc's volumes do
			// not have); a copy out mounts it read-only.
			Volumes: map[string]*api.VolumeRequest{copyVolume: {Name: copyVolume, Type: "host", Source: hv.Name}},
			RestartPolicy: &api.RestartPolicy{Attempts: ptr(0), Interval: ptr(24 * time.Hour), Delay: ptr(15 * time.Second),
				Mode: ptr("fail")},
			ReschedulePolicy: &api.ReschedulePolicy{Attempts: ptr(0), Unlimited: ptr(false)},
		}},
	}
	if len(job.Datacenters) == 0 {
		job.Datacenters = []string{"*"}
	}
	if r.cfg.Region != "" {
		job.Region = ptr(r.cfg.Region)
	}
	if r.cfg.NodePool != "" {
		job.NodePool = ptr(r.cfg.NodePool)
	}
	if hv.NodeID != "" {
		job.Constraints = []*api.Constraint{api.NewConstraint("${node.unique.id}", "=", hv.NodeID)}
	}
	return job
}

// runCopy registers a copy job, waits for it to end within timeout, and
// purges it.
func (r *Runtime) runCopy(ctx context.Context, job *api.Job, volume string, timeout time.Duration) error {
	nid := *job.ID
	if _, err := r.register(ctx, job, true, 0, copyGroup); err != nil {
		return err
	}
	defer r.purgeBuild(ctx, nid)
	alloc, err := r.awaitBatch(ctx, nid, copyGroup, timeout, nil, copyOutcome)
	switch {
	case errors.Is(err, errBuildTimeout):
		return errcode.New(errcode.AdapterFailed, "the copy of volume %s ran past its time limit of %s", volume, timeout).
			WithDetail("log_tail", r.batchTail(ctx, alloc, copyGroup)).
			WithRemedy("a volume copy is bounded by the nomad runtime's build time limit (%s): check the link between the Nomad client and svc", timeout)
	case err != nil:
		var e *errcode.Error
		if errors.As(err, &e) && e.Code == errcode.AdapterFailed {
			e.WithDetail("log_tail", r.batchTail(ctx, alloc, copyGroup)).
				WithRemedy("the copy runs /bin/sh, tar and curl on the Nomad client that holds the volume, which must reach svc at the nomad adapter's artifact_url; svc takes at most %d bytes (compressed) of a volume", r.cfg.Artifacts.cfg.MaxUploadBytes)
		}
		return err
	}
	return nil
}

// copyOutcome reads a copy job's allocation: done once it is terminal,
// with nil for a completed copy and ADAPTER_FAILED otherwise (the task's
// exit code, or why it never ran).
func copyOutcome(a *api.AllocationListStub) (bool, error) {
	ts := taskOf(a.TaskStates, copyGroup)
	if !terminal(a) && (ts == nil || ts.State != "dead") {
		return false, nil
	}
	if a.ClientStatus == api.AllocClientStatusComplete || (ts != nil && ts.State == "dead" && !ts.Failed) {
		return true, nil
	}
	why := fmt.Sprintf("allocation %s: %s", a.ClientStatus, redactQueries(a.ClientDescription))
	if ts != nil {
		for i := len(ts.Events) - 1; i >= 0; i-- {
			ev := ts.Events[i]
			if ev.Type == api.TaskTerminated {
				why = fmt.Sprintf("its task exited with code %d", exitCodeOf(ev))
				break
			}
			if ev.FailsTask || ev.Type == api.TaskArtifactDownloadFailed || ev.Type == api.TaskDriverFailure || ev.Type == api.TaskSetupFailure {
				why = ev.Type + ": " + redactQueries(ev.DisplayMessage)
				break
			}
		}
	}
	return true, errcode.New(errcode.AdapterFailed, "the volume copy job did not finish: %s", why).WithDetail("allocation", a.ID)
}
