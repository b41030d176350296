package nomad

import (
	"context"
	"strings"

	"github.com/hashicorp/nomad/api"

	"github.com/svchost/svc/internal/errcode"
	jobtemplates "github.com/svchost/svc/jobs-templates"
	"github.com/svchost/svc/scheduler"
)

// hostVolume is an app's volume as a Nomad dynamic host volume.
type hostVolume struct {
	Name     string // Nomad's volume name
	HostPath string // its directory on the node that holds it
}

// volumeName is the Nomad name of an app's volume (jobtemplates'
// VolumeSource): the same for every job of the app.
func volumeName(appID, volume string) string { return jobtemplates.VolumeSource(appID, volume) }

// ensureVolumes makes sure every volume the job's workloads mount exists
// as a dynamic host volume (plugin "mkdir", created on first use; it
// outlives the app's jobs, so a later job of the app finds it, and the
// job's volume request places the workload on the node that holds it).
// It returns them by volume name.
//
// Two controllers creating the same volume at once could create two;
// only the leader runs deploys, which keeps that from happening.
func (r *Runtime) ensureVolumes(ctx context.Context, job scheduler.Job) (map[string]hostVolume, error) {
	want := map[string]scheduler.Mount{}
	for _, t := range job.Workloads {
		for _, m := range t.Mounts {
			if _, ok := want[m.Volume]; !ok || m.SizeBytes > want[m.Volume].SizeBytes {
				want[m.Volume] = m
			}
		}
	}
	if len(want) == 0 {
		return nil, nil
	}
	if job.AppID == "" {
		return nil, errcode.Invalid("app_id", "job %s mounts volumes but names no app: volumes are an app's", job.ID)
	}
	stubs, _, err := r.client.HostVolumes().List(&api.HostVolumeListRequest{NodePool: r.cfg.NodePool}, r.query(ctx))
	if err != nil {
		return nil, r.translate(err, "list host volumes", "host volumes")
	}
	out := map[string]hostVolume{}
	for vol, m := range want {
		name := volumeName(job.AppID, vol)
		var found *api.HostVolumeStub
		for _, s := range stubs {
			if s.Name == name && s.State != api.HostVolumeStateUnavailable && (found == nil || s.CreateIndex < found.CreateIndex) {
				found = s
			}
		}
		if found != nil {
			v, _, err := r.client.HostVolumes().Get(found.ID, r.query(ctx))
			if err != nil {
				return nil, r.translate(err, "read host volume "+name, "host volume "+name)
			}
			out[vol] = hostVolume{Name: name, HostPath: v.HostPath}
			continue
		}
		req := &api.HostVolumeCreateRequest{Volume: &api.HostVolume{
			Name: name, Namespace: r.cfg.Namespace, PluginID: "mkdir", NodePool: r.cfg.NodePool,
			RequestedCapacityMinBytes: m.SizeBytes,
			RequestedCapabilities: []*api.HostVolumeCapability{{
				AttachmentMode: api.HostVolumeAttachmentModeFilesystem, AccessMode: api.HostVolumeAccessModeSingleNodeWriter,
			}},
		}}
		resp, _, err := r.client.HostVolumes().Create(req, r.write(ctx))
		if err != nil {
			return nil, r.translate(err, "create host volume "+name, "host volume "+name)
		}
		if resp == nil || resp.Volume == nil {
			return nil, errcode.New(errcode.AdapterFailed, "nomad created host volume %s but did not describe it", name)
		}
		out[vol] = hostVolume{Name: name, HostPath: resp.Volume.HostPath}
	}
	return out, nil
}

// volumeEnv is SVC_VOLUME_<NAME>: a volume's variable name.
func volumeEnv(volume string) string {
	return "SVC_VOLUME_" + strings.ToUpper(strings.ReplaceAll(volume, "-", "_"))
}
