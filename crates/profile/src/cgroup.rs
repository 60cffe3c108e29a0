//! Container and systemd-unit labels read from a cgroup v2 path alone (docs/design.md, "The
//! agent": container labels): no container runtime API is asked. The shapes are those the
//! runtimes and their cgroup drivers create:
//!
//! | runtime | systemd driver | cgroupfs driver |
//! |---|---|---|
//! | docker | `/system.slice/docker-<id>.scope` | `/docker/<id>` |
//! | containerd (CRI) | `…/cri-containerd-<id>.scope` | `/kubepods/…/pod<uid>/<id>` |
//! | CRI-O | `…/crio-<id>.scope` | `/kubepods/…/pod<uid>/crio-<id>` |
//! | podman | `/machine.slice/libpod-<id>.scope` (rootless: under `user@UID.service`) | `/libpod_parent/libpod-<id>` |
//! | systemd-nspawn | `/machine.slice/systemd-nspawn@<name>.service`, `machine-<name>.scope` | |
//!
//! Kubernetes pods: `kubepods.slice/kubepods-<qos>.slice/kubepods-<qos>-pod<uid>.slice` (the
//! uid's dashes written as underscores) or `kubepods/<qos>/pod<uid>`; a pod directly under
//! `kubepods` is of QoS class Guaranteed. The unit is the deepest `.service` or `.scope`
//! component (`nginx.service`, `session-3.scope`, `docker-<id>.scope`).

/// What a cgroup path says about who runs in it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct CgroupLabels {
    /// Container runtime: `docker`, `containerd`, `cri-o`, `podman`, `systemd-nspawn`, or `cri`
    /// (a Kubernetes container under the cgroupfs driver, whose path does not name its runtime).
    pub runtime: Option<&'static str>,
    /// Container id (64 hex digits), or the machine name for systemd-nspawn.
    pub container_id: Option<String>,
    /// Kubernetes pod UID (with dashes) and QoS class (`guaranteed`, `burstable`, `besteffort`).
    pub pod_uid: Option<String>,
    pub qos: Option<&'static str>,
    /// The systemd unit: the deepest `.service` or `.scope` component.
    pub unit: Option<String>,
}

/// A container id: 64 lower-case hex digits (docker, containerd, CRI-O and podman all use them).
fn is_container_id(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// The QoS class of a `kubepods` path component (`burstable`, `kubepods-besteffort.slice`).
fn qos_of(component: &str) -> Option<&'static str> {
    let c = component.strip_suffix(".slice").unwrap_or(component);
    let c = c.strip_prefix("kubepods-").unwrap_or(c);
    match c {
        "burstable" => Some("burstable"),
        "besteffort" => Some("besteffort"),
        _ => None,
    }
}

/// The pod UID of a pod component: `pod<uid>` (cgroupfs) or `kubepods[-qos]-pod<uid>.slice`
/// (systemd, dashes as underscores).
fn pod_uid_of(component: &str) -> Option<String> {
    let c = component.strip_suffix(".slice").unwrap_or(component);
    let uid = match c.rfind("pod") {
        Some(i) if i == 0 || c[..i].ends_with('-') => &c[i + 3..],
        _ => return None,
    };
    let uid = uid.replace('_', "-");
    let ok = uid.len() >= 32
        && uid.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-')
        && uid.bytes().filter(u8::is_ascii_hexdigit).count() == 32;
    ok.then_some(uid)
}

/// A container scope or directory: (runtime, id).
fn container_of(component: &str, in_pod: bool) -> Option<(&'static str, String)> {
    const SCOPES: [(&str, &str); 5] = [
        ("docker-", "docker"),
        ("cri-containerd-", "containerd"),
        ("crio-", "cri-o"),
        ("libpod-", "podman"),
        ("containerd-", "containerd"),
    ];
    let bare = component.strip_suffix(".scope").unwrap_or(component);
    for (prefix, runtime) in SCOPES {
        if let Some(id) = bare.strip_prefix(prefix) {
            if is_container_id(id) {
                return Some((runtime, id.to_string()));
            }
        }
    }
    if let Some(name) = component
        .strip_prefix("systemd-nspawn@")
        .and_then(|n| n.strip_suffix(".service"))
    {
        return Some(("systemd-nspawn", unescape_unit(name)));
    }
    if let Some(name) = component
        .strip_prefix("machine-")
        .and_then(|n| n.strip_suffix(".scope"))
    {
        // systemd-machined's scope of a registered machine (nspawn, and VMs registered with it).
        return Some(("systemd-nspawn", unescape_unit(name)));
    }
    (in_pod && is_container_id(component)).then(|| ("cri", component.to_string()))
}

/// systemd's unit-name escaping of `-` and other bytes as `\xNN` (machine names).
fn unescape_unit(s: &str) -> String {
    let mut out = Vec::with_capacity(s.len());
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 4 <= b.len() && b[i + 1] == b'x' {
            let hex = std::str::from_utf8(&b[i + 2..i + 4]).unwrap_or("");
            if let Ok(v) = u8::from_str_radix(hex, 16) {
                out.push(v);
                i += 4;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

impl CgroupLabels {
    /// Labels of the cgroup at `path` (below the cgroup2 mount; a leading `/` or the mount
    /// point `/sys/fs/cgroup` is allowed).
    pub fn parse(path: &str) -> CgroupLabels {
        let path = path.strip_prefix("/sys/fs/cgroup").unwrap_or(path);
        let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
        let mut l = CgroupLabels::default();
        let kube = parts
            .iter()
            .position(|p| *p == "kubepods" || *p == "kubepods.slice");
        let mut in_pod = false;
        if let Some(k) = kube {
            for p in &parts[k + 1..] {
                if let Some(q) = qos_of(p) {
                    l.qos = Some(q);
                } else if let Some(uid) = pod_uid_of(p) {
                    l.pod_uid = Some(uid);
                    in_pod = true;
                    break;
                }
            }
            if in_pod && l.qos.is_none() {
                l.qos = Some("guaranteed");
            }
        }
        for (i, p) in parts.iter().enumerate() {
            // Docker's cgroupfs driver: /docker/<id>.
            let docker_dir = i > 0 && parts[i - 1] == "docker" && is_container_id(p);
            let found = if docker_dir {
                Some(("docker", p.to_string()))
            } else {
                container_of(p, in_pod)
            };
            if let Some((runtime, id)) = found {
                l.runtime = Some(runtime);
                l.container_id = Some(id);
            }
            if p.ends_with(".service") || p.ends_with(".scope") {
                l.unit = Some(p.to_string());
            }
        }
        l
    }

    /// `runtime:id` (id shortened to 12 digits as `docker ps` shows it), or None.
    pub fn container_name(&self) -> Option<String> {
        let id = self.container_id.as_ref()?;
        let short = if is_container_id(id) { &id[..12] } else { id };
        Some(format!("{}:{short}", self.runtime.unwrap_or("container")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "4f1b9c2e8a7d6b5c4f1b9c2e8a7d6b5c4f1b9c2e8a7d6b5c4f1b9c2e8a7d6b5c";
    const UID: &str = "8a3c2e1f-7b6d-4c5e-9f0a-1b2c3d4e5f60";

    fn uid_underscored() -> String {
        UID.replace('-', "_")
    }

    #[test]
    fn kubernetes_systemd_driver_shapes() {
        for (runtime, scope) in [("containerd", "cri-containerd"), ("cri-o", "crio")] {
            let path = format!(
                "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{}.slice/{scope}-{ID}.scope",
                uid_underscored()
            );
            let l = CgroupLabels::parse(&path);
            assert_eq!(l.runtime, Some(runtime), "{path}");
            assert_eq!(l.container_id.as_deref(), Some(ID));
            assert_eq!(l.pod_uid.as_deref(), Some(UID));
            assert_eq!(l.qos, Some("burstable"));
            assert_eq!(l.unit, Some(format!("{scope}-{ID}.scope")));
        }
        let guaranteed = format!(
            "/sys/fs/cgroup/kubepods.slice/kubepods-pod{}.slice/cri-containerd-{ID}.scope",
            uid_underscored()
        );
        let l = CgroupLabels::parse(&guaranteed);
        assert_eq!(l.qos, Some("guaranteed"));
        assert_eq!(l.pod_uid.as_deref(), Some(UID));
        let besteffort = format!(
            "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{}.slice",
            uid_underscored()
        );
        let l = CgroupLabels::parse(&besteffort);
        assert_eq!((l.qos, l.container_id), (Some("besteffort"), None));
    }

    #[test]
    fn kubernetes_cgroupfs_driver_shapes() {
        let l = CgroupLabels::parse(&format!("/kubepods/burstable/pod{UID}/{ID}"));
        assert_eq!(l.runtime, Some("cri"));
        assert_eq!(l.container_id.as_deref(), Some(ID));
        assert_eq!(l.pod_uid.as_deref(), Some(UID));
        assert_eq!(l.qos, Some("burstable"));
        assert_eq!(l.unit, None);
        let l = CgroupLabels::parse(&format!("/kubepods/pod{UID}/crio-{ID}"));
        assert_eq!((l.runtime, l.qos), (Some("cri-o"), Some("guaranteed")));
    }

    #[test]
    fn docker_podman_nspawn_and_units() {
        let l = CgroupLabels::parse(&format!("/system.slice/docker-{ID}.scope"));
        assert_eq!(l.runtime, Some("docker"));
        assert_eq!(l.container_name(), Some(format!("docker:{}", &ID[..12])));
        let l = CgroupLabels::parse(&format!("/docker/{ID}"));
        assert_eq!(
            (l.runtime, l.container_id.as_deref()),
            (Some("docker"), Some(ID))
        );
        let rootless = format!(
            "/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-{ID}.scope/container"
        );
        let l = CgroupLabels::parse(&rootless);
        assert_eq!(l.runtime, Some("podman"));
        assert_eq!(l.unit, Some(format!("libpod-{ID}.scope")));
        let l = CgroupLabels::parse(&format!("/machine.slice/libpod-{ID}.scope"));
        assert_eq!(l.runtime, Some("podman"));
        // podman's monitor is no container.
        let l = CgroupLabels::parse(&format!("/machine.slice/libpod-conmon-{ID}.scope"));
        assert_eq!(l.runtime, None);
        let l = CgroupLabels::parse("/machine.slice/systemd-nspawn@debian\\x2dbox.service/payload");
        assert_eq!(l.runtime, Some("systemd-nspawn"));
        assert_eq!(l.container_id.as_deref(), Some("debian-box"));
        assert_eq!(
            l.container_name().as_deref(),
            Some("systemd-nspawn:debian-box")
        );
        let l = CgroupLabels::parse("/machine.slice/machine-web1.scope");
        assert_eq!(l.container_id.as_deref(), Some("web1"));
        let l = CgroupLabels::parse("/system.slice/nginx.service");
        assert_eq!(
            (l.runtime, l.unit.as_deref()),
            (None, Some("nginx.service"))
        );
        let l = CgroupLabels::parse("/user.slice/user-1000.slice/session-3.scope");
        assert_eq!(l.unit.as_deref(), Some("session-3.scope"));
        assert_eq!(CgroupLabels::parse("/"), CgroupLabels::default());
        // A 64-hex directory outside kubepods and docker is no container.
        assert_eq!(CgroupLabels::parse(&format!("/work/{ID}")).runtime, None);
        // Not quite an id: 63 digits, upper case.
        let short = &ID[..63];
        assert_eq!(
            CgroupLabels::parse(&format!("/docker/{short}")).runtime,
            None
        );
        let upper = ID.to_uppercase();
        assert_eq!(
            CgroupLabels::parse(&format!("/system.slice/docker-{upper}.scope")).runtime,
            None
        );
    }
}
