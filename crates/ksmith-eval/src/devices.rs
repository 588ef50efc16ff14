//! Which workers to start: GPUs from `nvidia-smi -L`, or CPU interpreter workers.

use std::process::Command;

/// What one worker runs on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Device {
    /// A GPU, by its index among the machine's GPUs (pinned with `CUDA_VISIBLE_DEVICES`).
    Gpu(u32),
    /// Triton's interpreter on CPU tensors (correctness only).
    Cpu,
}

impl Device {
    /// The worker's `--device` argument.
    pub fn worker_arg(&self) -> &'static str {
        match self {
            Device::Gpu(_) => "cuda",
            Device::Cpu => "cpu",
        }
    }

    /// A name for logs and errors.
    pub fn label(&self) -> String {
        match self {
            Device::Gpu(i) => format!("cuda:{i}"),
            Device::Cpu => "cpu".to_string(),
        }
    }
}

/// The GPU index of `"3"` or `"cuda:3"`.
pub fn gpu_index(spec: &str) -> Option<u32> {
    spec.strip_prefix("cuda:").unwrap_or(spec).parse().ok()
}

/// The number of GPUs `nvidia-smi -L` lists (0 when it is missing or fails).
pub fn count_gpus() -> usize {
    match Command::new("nvidia-smi").arg("-L").output() {
        Ok(out) if out.status.success() => String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| l.starts_with("GPU "))
            .count(),
        _ => 0,
    }
}

/// The workers `cfg` asks for: its `devices` list, with `auto` resolved by `nvidia-smi -L`.
pub fn planned(cfg: &crate::EvalConfig) -> Vec<Device> {
    let gpus = if cfg.devices.iter().any(|d| d == "auto") {
        count_gpus()
    } else {
        0
    };
    resolve(&cfg.devices, cfg.cpu_workers, gpus)
}

/// The devices for a `devices` list (validated) and the number of GPUs found.
pub fn resolve(devices: &[String], cpu_workers: usize, gpus: usize) -> Vec<Device> {
    if devices.iter().any(|d| d == "auto") {
        if gpus > 0 {
            return (0..gpus as u32).map(Device::Gpu).collect();
        }
        return vec![Device::Cpu; cpu_workers];
    }
    devices
        .iter()
        .map(|d| match gpu_index(d) {
            Some(i) => Device::Gpu(i),
            None => Device::Cpu,
        })
        .collect()
}

/// A name per worker for logs and reports: the device's label, numbered (`cpu#0`, `cpu#1`) where
/// several workers share it (CPU interpreter workers).
pub fn slot_labels(devices: &[Device]) -> Vec<String> {
    devices
        .iter()
        .enumerate()
        .map(|(i, d)| {
            let shared = devices.iter().filter(|other| *other == d).count() > 1;
            if shared {
                let k = devices[..i].iter().filter(|other| *other == d).count();
                format!("{}#{k}", d.label())
            } else {
                d.label()
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_uses_gpus_when_present_else_cpu_workers() {
        let auto = vec!["auto".to_string()];
        assert_eq!(resolve(&auto, 3, 2), vec![Device::Gpu(0), Device::Gpu(1)]);
        assert_eq!(resolve(&auto, 3, 0), vec![Device::Cpu; 3]);
    }

    #[test]
    fn explicit_lists_are_kept() {
        let list = vec!["cuda:2".to_string(), "0".to_string(), "cpu".to_string()];
        assert_eq!(
            resolve(&list, 1, 8),
            vec![Device::Gpu(2), Device::Gpu(0), Device::Cpu]
        );
        assert_eq!(gpu_index("x"), None);
    }

    #[test]
    fn workers_sharing_a_device_get_numbered_labels() {
        let devices = [Device::Gpu(1), Device::Cpu, Device::Gpu(0), Device::Cpu];
        assert_eq!(
            slot_labels(&devices),
            ["cuda:1", "cpu#0", "cuda:0", "cpu#1"]
        );
    }
}
