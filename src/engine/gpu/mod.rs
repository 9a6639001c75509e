//! The GPU engine: the PFAC table of [`super::pfac`] walked by a Vulkan
//! compute shader (`shaders/pfac.comp`).
//!
//! All Vulkan code of the crate lives in this module; its public API uses no
//! vulkano type, so the rest of the crate (and the CLI) see devices as
//! [`DeviceInfo`], choose one with a [`DeviceChoice`], and search through the
//! [`Engine`](super::Engine) trait.
//!
//! Vulkan is loaded at run time (vulkano `dlopen`s `libvulkan.so.1`), so the
//! binary builds and runs everywhere; where Vulkan is missing, [`GpuError`]
//! says which piece is missing:
//!
//! * no loader library ([`GpuError::NoLoader`]),
//! * a loader but no driver/ICD ([`GpuError::NoDriver`]),
//! * devices, but none with a compute queue ([`GpuError::NoComputeDevice`]),
//! * only a software rasterizer such as llvmpipe, which `--engine auto` must
//!   not pick ([`GpuError::SoftwareOnly`]).
//!
//! See [`GpuEngine`] for the buffers, the path of a haystack from the disk to
//! the shader (staging memory the pipeline reads blocks into, in-place or
//! device-copy uploads), the slots that let several worker threads keep the
//! device busy, and the handling of result overflow.

mod cache;
mod engine;
mod staging;

pub use cache::{
    CacheKey, CacheState, MAX_CACHE_BYTES, NO_CACHE_ENV, PipelineCacheFile, default_cache_dir,
    disable_pipeline_cache,
};
pub use engine::{GpuConfig, GpuEngine, UploadPath};

use std::fmt;
use std::sync::Arc;

use vulkano::device::QueueFlags;
use vulkano::device::physical::{PhysicalDevice, PhysicalDeviceType};
use vulkano::instance::{Instance, InstanceCreateFlags, InstanceCreateInfo};
use vulkano::memory::MemoryHeapFlags;
use vulkano::{Validated, VulkanError, VulkanLibrary};

/// Why the GPU engine cannot run. Every message is one line, meant for the
/// user, and names what to install or which option to use.
#[derive(Debug, thiserror::Error)]
pub enum GpuError {
    /// `libvulkan.so.1` (the Vulkan loader) could not be loaded.
    #[error(
        "no Vulkan loader library (libvulkan.so.1) could be loaded; install the Vulkan loader (Debian: libvulkan1)"
    )]
    NoLoader,
    /// The loader is there but no driver (ICD) is installed or usable.
    #[error(
        "the Vulkan loader found no driver (ICD); install a Vulkan driver (Debian: mesa-vulkan-drivers, or the GPU vendor's) or check VK_DRIVER_FILES / VK_ICD_FILENAMES (VK_LOADER_DEBUG=driver says why a driver listed there did not load)"
    )]
    NoDriver,
    /// Vulkan devices exist but none has a queue that can run compute shaders.
    #[error("no Vulkan device with a compute queue was found")]
    NoComputeDevice,
    /// `Auto` found only CPU-type (software) devices and software was not allowed.
    #[error(
        "only a software Vulkan device ({0}) is present; use --engine gpu (optionally with --device) to run on it anyway"
    )]
    SoftwareOnly(String),
    /// The chosen device is a software device and software was not allowed.
    #[error("Vulkan device {0} is a software device; use --engine gpu to run on it anyway")]
    SoftwareRefused(String),
    /// `Index` or `NameContains` matched no device.
    #[error("no Vulkan device {0}; the available devices are: {1}")]
    NoSuchDevice(String, String),
    /// The chosen device has no compute queue.
    #[error("Vulkan device {0} has no compute queue")]
    DeviceWithoutCompute(String),
    /// The pattern set cannot be turned into a table this device can hold.
    #[error("{0}")]
    Build(String),
    /// Any other failure while setting the device up (out of memory, driver error).
    #[error("Vulkan setup failed: {0}")]
    Init(String),
}

/// Flattens an error's text to one line (vulkano's validation errors span several).
pub(crate) fn one_line(e: impl fmt::Display) -> String {
    e.to_string()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

/// One memory heap of a device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemoryHeapInfo {
    /// Size in bytes.
    pub size: u64,
    /// Is it the device's own (VRAM) memory?
    pub device_local: bool,
}

/// A Vulkan physical device, as listed by [`list_devices`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceInfo {
    /// Position in Vulkan's enumeration order (what [`DeviceChoice::Index`] takes).
    pub index: usize,
    /// `deviceName`, e.g. `llvmpipe (LLVM 15.0.6, 256 bits)`.
    pub name: String,
    /// `discrete GPU`, `integrated GPU`, `virtual GPU`, `CPU` or `other`.
    pub device_type: String,
    /// A CPU-type device (software rendering, e.g. llvmpipe/lavapipe).
    pub software: bool,
    /// Driver name and info, e.g. `llvmpipe (Mesa 22.3.6 (LLVM 15.0.6))`.
    pub driver: String,
    /// Vulkan API version the device supports, e.g. `1.3.230`.
    pub api_version: String,
    /// Has a queue family that supports compute.
    pub compute: bool,
    /// `maxStorageBufferRange`: the largest buffer one shader binding can see.
    pub max_storage_buffer_range: u64,
    /// Memory heaps.
    pub heaps: Vec<MemoryHeapInfo>,
}

impl fmt::Display for DeviceInfo {
    /// `0: llvmpipe (LLVM 15.0.6, 256 bits) [CPU, software] driver llvmpipe (...), Vulkan 1.3.230, heaps 2.0 GiB host`
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {} [{}", self.index, self.name, self.device_type)?;
        if self.software {
            f.write_str(", software")?;
        }
        if !self.compute {
            f.write_str(", no compute queue")?;
        }
        write!(
            f,
            "] driver {}, Vulkan {}, heaps",
            self.driver, self.api_version
        )?;
        for (i, h) in self.heaps.iter().enumerate() {
            let sep = if i == 0 { " " } else { " + " };
            let kind = if h.device_local {
                "device-local"
            } else {
                "host"
            };
            write!(
                f,
                "{sep}{:.1} GiB {kind}",
                h.size as f64 / (1u64 << 30) as f64
            )?;
        }
        Ok(())
    }
}

/// Which device the GPU engine runs on.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum DeviceChoice {
    /// The best device: discrete > integrated > virtual > other GPU; a
    /// software (CPU-type) device only when software is allowed and nothing
    /// else has a compute queue.
    #[default]
    Auto,
    /// The device at this position of [`list_devices`].
    Index(usize),
    /// The first device whose name contains this text (case-insensitive).
    NameContains(String),
}

impl fmt::Display for DeviceChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceChoice::Auto => f.write_str("auto"),
            DeviceChoice::Index(i) => write!(f, "#{i}"),
            DeviceChoice::NameContains(s) => write!(f, "matching {s:?}"),
        }
    }
}

/// Lists the Vulkan devices, in enumeration order.
pub fn list_devices() -> Result<Vec<DeviceInfo>, GpuError> {
    let instance = open_instance()?;
    let devices = physical_devices(&instance)?;
    Ok(devices
        .iter()
        .enumerate()
        .map(|(i, d)| describe(i, d))
        .collect())
}

/// Loads Vulkan and creates an instance, telling a missing loader from a
/// missing driver.
fn open_instance() -> Result<Arc<Instance>, GpuError> {
    let library = VulkanLibrary::new().map_err(|_| GpuError::NoLoader)?;
    let mut info = InstanceCreateInfo {
        application_name: Some("gpucarve".into()),
        ..Default::default()
    };
    // Lets portability implementations (MoltenVK) enumerate; harmless elsewhere.
    if library.supported_extensions().khr_portability_enumeration {
        info.flags |= InstanceCreateFlags::ENUMERATE_PORTABILITY;
        info.enabled_extensions.khr_portability_enumeration = true;
    }
    Instance::new(library, info).map_err(|e| match e {
        // What the loader answers when it finds no ICD at all.
        Validated::Error(VulkanError::IncompatibleDriver)
        | Validated::Error(VulkanError::InitializationFailed) => GpuError::NoDriver,
        other => GpuError::Init(format!(
            "cannot create a Vulkan instance: {}",
            one_line(other)
        )),
    })
}

/// The physical devices; none at all means no usable driver.
fn physical_devices(instance: &Arc<Instance>) -> Result<Vec<Arc<PhysicalDevice>>, GpuError> {
    let devices: Vec<_> = instance
        .enumerate_physical_devices()
        .map_err(|e| match e {
            VulkanError::IncompatibleDriver | VulkanError::InitializationFailed => {
                GpuError::NoDriver
            }
            other => GpuError::Init(format!(
                "cannot enumerate Vulkan devices: {}",
                one_line(other)
            )),
        })?
        .collect();
    if devices.is_empty() {
        return Err(GpuError::NoDriver);
    }
    Ok(devices)
}

fn type_name(t: PhysicalDeviceType) -> &'static str {
    match t {
        PhysicalDeviceType::DiscreteGpu => "discrete GPU",
        PhysicalDeviceType::IntegratedGpu => "integrated GPU",
        PhysicalDeviceType::VirtualGpu => "virtual GPU",
        PhysicalDeviceType::Cpu => "CPU",
        _ => "other",
    }
}

/// Preference of `Auto` (lower is better).
fn rank(t: PhysicalDeviceType) -> u8 {
    match t {
        PhysicalDeviceType::DiscreteGpu => 0,
        PhysicalDeviceType::IntegratedGpu => 1,
        PhysicalDeviceType::VirtualGpu => 2,
        PhysicalDeviceType::Cpu => 4,
        _ => 3,
    }
}

/// The first queue family that can run compute shaders.
fn compute_family(d: &PhysicalDevice) -> Option<u32> {
    d.queue_family_properties()
        .iter()
        .position(|q| q.queue_flags.intersects(QueueFlags::COMPUTE))
        .and_then(|i| u32::try_from(i).ok())
}

fn describe(index: usize, d: &PhysicalDevice) -> DeviceInfo {
    let p = d.properties();
    let driver = match (&p.driver_name, &p.driver_info) {
        (Some(n), Some(i)) if !i.is_empty() => format!("{n} ({i})"),
        (Some(n), _) => n.clone(),
        _ => match p.driver_id {
            Some(id) => format!("{id:?}"),
            None => format!("version {:#x}", p.driver_version),
        },
    };
    DeviceInfo {
        index,
        name: p.device_name.clone(),
        device_type: type_name(p.device_type).into(),
        software: p.device_type == PhysicalDeviceType::Cpu,
        driver,
        api_version: d.api_version().to_string(),
        compute: compute_family(d).is_some(),
        max_storage_buffer_range: u64::from(p.max_storage_buffer_range),
        heaps: d
            .memory_properties()
            .memory_heaps
            .iter()
            .map(|h| MemoryHeapInfo {
                size: h.size,
                device_local: h.flags.intersects(MemoryHeapFlags::DEVICE_LOCAL),
            })
            .collect(),
    }
}

/// Whether `--engine auto` should look for a GPU at all, asked without
/// loading Vulkan. On Linux a hardware Vulkan driver reaches its device
/// through a device node: a DRM node (`/dev/dri/renderD*`, `card*`: Mesa's
/// drivers, virtio-gpu), NVIDIA's (`/dev/nvidiactl`, `/dev/nvidia0`...),
/// AMD's `/dev/kfd` or WSL's `/dev/dxg`. With none of them, enumerating
/// the devices would only load every installed driver to find a software
/// rasteriser or nothing, which `auto` does not pick anyway: 25-40 ms of
/// every run on a machine with Mesa's drivers and no GPU. A driver list
/// given in the environment (`VK_DRIVER_FILES`, `VK_ICD_FILENAMES`,
/// `VK_ADD_DRIVER_FILES`) is always looked at, and so is every machine
/// other than Linux.
pub fn may_have_gpu() -> bool {
    if !cfg!(target_os = "linux") {
        return true;
    }
    gpu_nodes_or_drivers(std::path::Path::new("/dev"), |k| std::env::var_os(k))
}

/// [`may_have_gpu`] with the device folder and the environment given.
fn gpu_nodes_or_drivers(
    dev: &std::path::Path,
    env: impl Fn(&str) -> Option<std::ffi::OsString>,
) -> bool {
    const DRIVER_LISTS: [&str; 3] = ["VK_DRIVER_FILES", "VK_ICD_FILENAMES", "VK_ADD_DRIVER_FILES"];
    if DRIVER_LISTS
        .iter()
        .any(|k| env(k).is_some_and(|v| !v.is_empty()))
    {
        return true;
    }
    if ["kfd", "dxg", "nvidiactl"]
        .iter()
        .any(|n| dev.join(n).exists())
    {
        return true;
    }
    let any_named = |dir: &std::path::Path, prefixes: &[&str]| {
        std::fs::read_dir(dir).is_ok_and(|entries| {
            entries.flatten().any(|e| {
                let name = e.file_name();
                let name = name.to_string_lossy();
                prefixes.iter().any(|p| name.starts_with(p))
            })
        })
    };
    any_named(&dev.join("dri"), &["renderD", "card"]) || any_named(dev, &["nvidia"])
}

/// A device picked for the engine, with its compute queue family.
struct Chosen {
    device: Arc<PhysicalDevice>,
    queue_family: u32,
    info: DeviceInfo,
}

/// Applies `choice` and the software policy to the devices of `instance`.
fn choose(
    instance: &Arc<Instance>,
    choice: &DeviceChoice,
    allow_software: bool,
) -> Result<Chosen, GpuError> {
    let devices = physical_devices(instance)?;
    let infos: Vec<DeviceInfo> = devices
        .iter()
        .enumerate()
        .map(|(i, d)| describe(i, d))
        .collect();
    let all_names = || {
        infos
            .iter()
            .map(|i| format!("{}: {}", i.index, i.name))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let index = match choice {
        DeviceChoice::Auto => {
            let mut usable: Vec<&DeviceInfo> = infos.iter().filter(|i| i.compute).collect();
            if usable.is_empty() {
                return Err(GpuError::NoComputeDevice);
            }
            usable.sort_by_key(|i| (rank(devices[i.index].properties().device_type), i.index));
            let best = usable[0];
            if best.software && !allow_software {
                return Err(GpuError::SoftwareOnly(best.name.clone()));
            }
            best.index
        }
        DeviceChoice::Index(i) => {
            if *i >= infos.len() {
                return Err(GpuError::NoSuchDevice(format!("#{i}"), all_names()));
            }
            *i
        }
        DeviceChoice::NameContains(text) => {
            let needle = text.to_lowercase();
            infos
                .iter()
                .find(|i| i.name.to_lowercase().contains(&needle))
                .map(|i| i.index)
                .ok_or_else(|| GpuError::NoSuchDevice(format!("matching {text:?}"), all_names()))?
        }
    };
    let info = infos[index].clone();
    if info.software && !allow_software {
        return Err(GpuError::SoftwareRefused(format!(
            "{}: {}",
            info.index, info.name
        )));
    }
    let device = devices[index].clone();
    let queue_family = compute_family(&device)
        .ok_or_else(|| GpuError::DeviceWithoutCompute(format!("{}: {}", info.index, info.name)))?;
    Ok(Chosen {
        device,
        queue_family,
        info,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_looks_for_a_gpu_only_where_a_device_node_or_driver_list_is() {
        let dev = tempfile::tempdir().unwrap();
        let none = |_: &str| None;
        assert!(!gpu_nodes_or_drivers(dev.path(), none));
        // An empty DRM folder (no render node) is no GPU either.
        std::fs::create_dir(dev.path().join("dri")).unwrap();
        assert!(!gpu_nodes_or_drivers(dev.path(), none));
        let listed = |k: &str| (k == "VK_DRIVER_FILES").then(|| "/x/nvidia_icd.json".into());
        assert!(gpu_nodes_or_drivers(dev.path(), listed));
        let empty = |k: &str| (k == "VK_ICD_FILENAMES").then(|| "".into());
        assert!(!gpu_nodes_or_drivers(dev.path(), empty));
        for node in [
            "dri/renderD128",
            "dri/card0",
            "nvidia0",
            "nvidiactl",
            "kfd",
            "dxg",
        ] {
            let d = tempfile::tempdir().unwrap();
            std::fs::create_dir(d.path().join("dri")).unwrap();
            std::fs::write(d.path().join(node), b"").unwrap();
            assert!(gpu_nodes_or_drivers(d.path(), none), "{node}");
        }
    }

    #[test]
    fn messages_are_one_line() {
        let errors = [
            GpuError::NoLoader,
            GpuError::NoDriver,
            GpuError::NoComputeDevice,
            GpuError::SoftwareOnly("llvmpipe (LLVM 15.0.6, 256 bits)".into()),
            GpuError::SoftwareRefused("0: llvmpipe".into()),
            GpuError::NoSuchDevice("#3".into(), "0: llvmpipe".into()),
            GpuError::DeviceWithoutCompute("1: x".into()),
            GpuError::Init(one_line("a\n  b\tc")),
        ];
        for e in errors {
            let m = e.to_string();
            assert!(!m.contains('\n'), "{m}");
        }
        assert!(
            GpuError::SoftwareOnly("llvmpipe".into())
                .to_string()
                .starts_with("only a software Vulkan device (llvmpipe)")
        );
        assert_eq!(one_line("a\n  b\tc"), "a b c");
    }

    #[test]
    fn auto_prefers_real_gpus() {
        assert!(rank(PhysicalDeviceType::DiscreteGpu) < rank(PhysicalDeviceType::IntegratedGpu));
        assert!(rank(PhysicalDeviceType::IntegratedGpu) < rank(PhysicalDeviceType::VirtualGpu));
        assert!(rank(PhysicalDeviceType::VirtualGpu) < rank(PhysicalDeviceType::Other));
        assert!(rank(PhysicalDeviceType::Other) < rank(PhysicalDeviceType::Cpu));
    }
}
