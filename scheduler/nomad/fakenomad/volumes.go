package fakenomad

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/hashicorp/nomad/api"
)

// Dynamic host volumes: the fake's node has the "mkdir" plugin only, and
// creates a volume as a directory under <DataDir>/volumes/<id>.

func (s *Server) volumeCreate(w http.ResponseWriter, r *http.Request) {
	var req api.HostVolumeCreateRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		codedError(w, http.StatusBadRequest, err.Error())
		return
	}
	v := req.Volume
	if v == nil || v.Name == "" {
		codedError(w, http.StatusBadRequest, "missing volume name")
		return
	}
	if v.PluginID != "mkdir" {
		codedError(w, http.StatusInternalServerError, "no node with plugin "+v.PluginID)
		return
	}
	if v.Namespace == "" {
		v.Namespace = namespaceOf(r, nil)
	}
	pool := v.NodePool
	if pool != "" && pool != s.cfg.NodePool {
		codedError(w, http.StatusInternalServerError, "could not place volume "+v.Name+": no node in pool "+pool)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if v.ID == "" {
		v.ID = newID()
	}
	v.NodeID, v.NodePool = s.nodeID, s.cfg.NodePool
	v.HostPath = filepath.Join(s.cfg.DataDir, "volumes", v.ID)
	if err := os.MkdirAll(v.HostPath, 0o700); err != nil {
		codedError(w, http.StatusInternalServerError, err.Error())
		return
	}
	v.State = api.HostVolumeStateReady
	v.CapacityBytes = v.RequestedCapacityMinBytes
	idx := s.bumpLocked("host_volumes")
	v.CreateIndex, v.ModifyIndex = idx, idx
	v.CreateTime, v.ModifyTime = time.Now().UnixNano(), time.Now().UnixNano()
	s.volumes[v.ID] = v
	setMeta(w, idx)
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(api.HostVolumeCreateResponse{Volume: v})
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

func (s *Server) volumeGet(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	s.blockingQuery(w, r, "host_volumes", func() (any, uint64, int, string) {
		v := s.volumes[id]
		if v == nil {
			return nil, 0, http.StatusNotFound, "volume not found"
		}
		return v, v.ModifyIndex, 0, ""
	})
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
