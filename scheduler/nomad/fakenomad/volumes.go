package fakenomad

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"time"

	"github.com/hashicorp/nomad/api"
)

// Dynamic host volumes, as Nomad v2 makes them (nomad/host_volume_endpoint.go,
// client/hostvolumemanager): the fake's node has the built-in plugin
// "mkdir" only, which creates a volume as a directory under
// <DataDir>/volumes/<id> with no size limit (capacity 0). A volume is
// created pending and becomes ready when the node's fingerprint reports
// it: Nomad's client does so with its next node update, the fake
// fingerprintDelay later. Jobs are placed only on a ready volume.
//
// Create refuses what Nomad refuses, with its text and status 500: a
// capacity_max below capacity_min, a node pool that does not exist, a
// plugin no node has (an empty plugin ID means Nomad's "default", which
// the node does not have), and a name the node already has a volume of
// (in any namespace). Updates (a volume with an ID) are not supported.

// fingerprintDelay is how long after its creation the fake's node
// reports a volume.
const fingerprintDelay = 100 * time.Millisecond

func (s *Server) volumeCreate(w http.ResponseWriter, r *http.Request) {
	var req api.HostVolumeCreateRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		codedError(w, http.StatusBadRequest, err.Error())
		return
	}
	if req.Volume == nil {
		codedError(w, http.StatusInternalServerError, "missing volume definition")
		return
	}
	v := *req.Volume
	if v.ID != "" {
		codedError(w, http.StatusBadRequest, "the fake does not update host volumes")
		return
	}
	switch {
	case v.Name == "":
		codedError(w, http.StatusInternalServerError, "volume validation failed: missing name")
		return
	case v.RequestedCapacityMaxBytes < v.RequestedCapacityMinBytes:
		codedError(w, http.StatusInternalServerError, fmt.Sprintf("volume validation failed: capacity_max (%d) must be larger than capacity_min (%d)",
			v.RequestedCapacityMaxBytes, v.RequestedCapacityMinBytes))
		return
	}
	if v.Namespace == "" {
		v.Namespace = namespaceOf(r, nil)
	}
	if v.PluginID == "" {
		v.PluginID = "default"
	}
	if len(v.RequestedCapabilities) == 0 {
		v.RequestedCapabilities = []*api.HostVolumeCapability{{
			AttachmentMode: api.HostVolumeAttachmentModeFilesystem, AccessMode: api.HostVolumeAccessModeSingleNodeWriter,
		}}
	}
	if v.NodePool != "" && v.NodePool != s.cfg.NodePool {
		codedError(w, http.StatusInternalServerError, fmt.Sprintf("validating volume %q against state failed: node pool %q does not exist", v.Name, v.NodePool))
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	existing, infeasible := 0, 0
	for _, o := range s.volumes {
		if o.NodeID == s.nodeID && o.Name == v.Name {
			existing = 1
		}
	}
	if existing == 0 && v.PluginID != "mkdir" {
		infeasible = 1
	}
	if existing+infeasible > 0 {
		codedError(w, http.StatusInternalServerError, fmt.Sprintf("could not place volume %q: no node meets constraints: "+
			"%d nodes had existing volume, 0 nodes filtered by node pool governance, %d nodes were infeasible", v.Name, existing, infeasible))
		return
	}
	v.ID = newID()
	v.NodeID, v.NodePool = s.nodeID, s.cfg.NodePool
	v.HostPath = filepath.Join(s.cfg.DataDir, "volumes", v.ID)
	if err := os.MkdirAll(v.HostPath, 0o755); err != nil {
		codedError(w, http.StatusInternalServerError, err.Error())
		return
	}
	v.State = api.HostVolumeStatePending
	v.CapacityBytes = 0
	idx := s.bumpLocked("host_volumes")
	v.CreateIndex, v.ModifyIndex = idx, idx
	v.CreateTime, v.ModifyTime = time.Now().UnixNano(), time.Now().UnixNano()
	s.volumes[v.ID] = &v
	time.AfterFunc(fingerprintDelay, func() { s.volumeFingerprinted(v.ID) })
	setMeta(w, idx)
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(api.HostVolumeCreateResponse{Volume: &v})
}

// volumeFingerprinted makes a pending volume ready, as the node's
// fingerprint of it does in Nomad's state store. Volumes in s.volumes are
// never changed in place: answers encode them outside the lock.
func (s *Server) volumeFingerprinted(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.volumes[id]
	if s.closed || old == nil || old.State != api.HostVolumeStatePending {
		return
	}
	v := *old
	v.State = api.HostVolumeStateReady
	v.ModifyIndex = s.bumpLocked("host_volumes")
	v.ModifyTime = time.Now().UnixNano()
	s.volumes[id] = &v
}

func (s *Server) volumeList(w http.ResponseWriter, r *http.Request) {
	if t := r.URL.Query().Get("type"); t != "host" {
		codedError(w, http.StatusBadRequest, "the fake lists host volumes only")
		return
	}
	ns := namespaceOf(r, nil)
	s.blockingQuery(w, r, "host_volumes", func() (any, uint64, int, string) {
		out := []*api.HostVolumeStub{}
		for _, v := range s.volumes {
			if v.Namespace != ns && ns != "*" {
				continue
			}
			if p := r.URL.Query().Get("node_pool"); p != "" && p != v.NodePool {
				continue
			}
			out = append(out, &api.HostVolumeStub{Namespace: v.Namespace, ID: v.ID, Name: v.Name, PluginID: v.PluginID,
				NodePool: v.NodePool, NodeID: v.NodeID, CapacityBytes: v.CapacityBytes, State: v.State,
				CreateIndex: v.CreateIndex, CreateTime: v.CreateTime, ModifyIndex: v.ModifyIndex, ModifyTime: v.ModifyTime})
		}
		sort.Slice(out, func(i, j int) bool { return out[i].CreateIndex < out[j].CreateIndex })
		return out, 0, 0, ""
	})
}

// volumeGet answers a volume of the request's namespace: 404 "volume not
// found" for another's, as Nomad looks it up by namespace and ID.
func (s *Server) volumeGet(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	ns := namespaceOf(r, nil)
	s.blockingQuery(w, r, "host_volumes", func() (any, uint64, int, string) {
		v := s.volumes[id]
		if v == nil || v.Namespace != ns {
			return nil, 0, http.StatusNotFound, "volume not found"
		}
		return v, v.ModifyIndex, 0, ""
	})
}

// volumeServes says whether a ready dynamic host volume serves a group's
// request, as Nomad's scheduler decides (scheduler/feasible,
// hostVolumeIsAvailable): the request's access mode (by default
// single-node-reader-only for a read-only request, single-node-writer
// otherwise) and attachment mode must be among the volume's capabilities,
// and a reader request must be read-only, a writer one read-write.
func volumeServes(v *api.HostVolume, req *api.VolumeRequest) bool {
	if v == nil {
		return false
	}
	access, attach := api.HostVolumeAccessMode(req.AccessMode), api.HostVolumeAttachmentMode(req.AttachmentMode)
	if access == "" {
		access = api.HostVolumeAccessModeSingleNodeWriter
		if req.ReadOnly {
			access = api.HostVolumeAccessModeSingleNodeReader
		}
	}
	if attach == "" {
		attach = api.HostVolumeAttachmentModeFilesystem
	}
	if !slices.ContainsFunc(v.RequestedCapabilities, func(c *api.HostVolumeCapability) bool {
		return c.AccessMode == access && c.AttachmentMode == attach
	}) {
		return false
	}
	switch access {
	case api.HostVolumeAccessModeSingleNodeReader:
		return req.ReadOnly
	case api.HostVolumeAccessModeSingleNodeWriter:
		return !req.ReadOnly
	}
	return true
}

// hostVolumeLocked finds a ready host volume by name in the namespace.
func (s *Server) hostVolumeLocked(ns, name string) *api.HostVolume {
	for _, v := range s.volumes {
		if v.Namespace == ns && v.Name == name && v.State == api.HostVolumeStateReady {
			return v
		}
	}
	return nil
}
