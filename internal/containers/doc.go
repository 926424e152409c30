// Package containers names the container a cgroup belongs to: its name, image and short id,
// found the way each runtime publishes them on disk (see docs/containers.md).
//
// A Podman or Docker cgroup's name tells the runtime and the full container id ("libpod_parent.libpod-<64 hex>"
// for Podman with the cgroupfs manager, "docker.<64 hex>" or "system.docker-<64 hex>" for
// Docker); the runtime's own state, which only root may write, gives the name and image:
//
//   - Podman: containers/storage's overlay-containers/containers.json (every container's id,
//     names and a metadata string holding its image name), read again when its size, inode or
//     modification time changes, looked at no more than once a second;
//   - Docker: containers/<id>/config.v2.json (Name, Config.Image), read once per container;
//   - containerd (Kubernetes through CRI included), CRI-O, runc and crun, whose cgroups are named by
//     whoever made them: an index by cgroup of their state (containerd's task bundles
//     io.containerd.runtime.v2.task/<namespace>/<id>/config.json, with the CRI annotations
//     naming a Kubernetes container's pod, namespace and name; runc's <id>/state.json; crun's
//     <id>/status; CRI-O's copy of each container's spec in containers/storage,
//     overlay-containers/<id>/userdata/config.json, with its pod, namespace and name), rebuilt at
//     most once a second when a lookup misses (ociindex.go).
//
// Nothing is read that a container controls: no path inside a container's root, no symlink
// (every file is opened with O_NOFOLLOW), and every directory and file on the way must be owned
// by root and writable by no one else; each read is capped in size. Names and images are data:
// they are cut to valid UTF-8 without control characters and to a bounded length, and they
// only ever fill the container and image labels, never the cgroup or another label.
//
// A Resolver is safe for concurrent use; its cache is bounded.
package containers
