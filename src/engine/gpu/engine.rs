//! [`GpuEngine`]: device, queues, pipeline, table buffers, the slot pool and
//! the path of a haystack from host memory to the shader.

use std::fmt::Display;
use std::ops::Range;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use vulkano::Version;
use vulkano::buffer::{Buffer, BufferCreateInfo, BufferUsage, Subbuffer};
use vulkano::command_buffer::allocator::StandardCommandBufferAllocator;
use vulkano::command_buffer::{
    AutoCommandBufferBuilder, CommandBufferSubmitInfo, CommandBufferUsage, CopyBufferInfo,
    PrimaryAutoCommandBuffer, SemaphoreSubmitInfo, SubmitInfo,
};
use vulkano::descriptor_set::allocator::StandardDescriptorSetAllocator;
use vulkano::descriptor_set::{DescriptorSet, WriteDescriptorSet};
use vulkano::device::physical::PhysicalDeviceType;
use vulkano::device::{
    Device, DeviceCreateInfo, DeviceExtensions, Queue, QueueCreateInfo, QueueFlags,
};
use vulkano::memory::allocator::{AllocationCreateInfo, MemoryTypeFilter, StandardMemoryAllocator};
use vulkano::pipeline::cache::{PipelineCache, PipelineCacheCreateInfo};
use vulkano::pipeline::compute::ComputePipelineCreateInfo;
use vulkano::pipeline::layout::PipelineDescriptorSetLayoutCreateInfo;
use vulkano::pipeline::{
    ComputePipeline, Pipeline, PipelineBindPoint, PipelineLayout, PipelineShaderStageCreateInfo,
};
use vulkano::query::{QueryPool, QueryPoolCreateInfo, QueryResultFlags, QueryType};
use vulkano::shader::{ShaderModule, ShaderModuleCreateInfo};
use vulkano::sync::fence::{Fence, FenceCreateInfo};
use vulkano::sync::semaphore::{Semaphore, SemaphoreCreateInfo};
use vulkano::sync::{self, GpuFuture, PipelineStage, PipelineStages, Sharing};

use super::cache::{CacheKey, CacheState, PipelineCacheFile};
use super::staging::StagingMemory;
use super::{Chosen, DeviceChoice, DeviceInfo, GpuError, choose, one_line, open_instance};
use crate::engine::pfac::PfacTable;
use crate::engine::{Engine, EngineError, Hit, PatternId, Stage, StageClock};
use crate::pattern::Pattern;
use crate::source::BufferProvider;

/// SPIR-V of `shaders/pfac.comp`, compiled (or copied) by `build.rs`.
static PFAC_SPIRV: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/pfac.spv"));

/// `local_size_x` of the shader.
const WORKGROUP_SIZE: u64 = 64;
/// Start offsets each invocation handles, at least, in its grid-stride loop
/// (fewer, fuller invocations; the loop makes any count correct).
const STARTS_PER_INVOCATION: u64 = 16;
/// Workgroups per dispatch never exceed this (the minimum every Vulkan
/// device supports for `maxComputeWorkGroupCount[0]`).
const MAX_GROUPS: u32 = 65_535;
/// A haystack is at most 1 GiB whatever the device allows: positions are
/// 32-bit in the shader and `start + stride` must not wrap.
const MAX_SLOT_BYTES: usize = 1 << 30;
/// Results buffers never exceed this, whatever the device allows.
const MAX_RESULT_BYTES: u64 = 512 << 20;
/// Words before the hit records in the results buffer: the hit counter and
/// the "counter passed 2^31" flag.
const RESULT_HEADER_WORDS: u64 = 2;

/// How a haystack reaches the memory the shader reads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum UploadPath {
    /// [`DeviceCopy`](Self::DeviceCopy) on a discrete GPU,
    /// [`InPlace`](Self::InPlace) on any other device.
    #[default]
    Auto,
    /// The shader reads the host-visible buffer the haystack lies in (a
    /// staging buffer, or the slot's own buffer): integrated GPUs,
    /// unified memory, lavapipe.
    InPlace,
    /// A copy into a device-local buffer first, on a transfer queue (a queue
    /// family of its own, i.e. a DMA engine, when the device has one; the
    /// compute queue otherwise); the dispatch waits for it on a semaphore.
    DeviceCopy,
}

impl UploadPath {
    /// Environment variable that overrides the choice for `build_engines`
    /// (`auto`, `in-place`, `copy`): how the device-copy path is exercised
    /// on devices that would not pick it (lavapipe in the tests).
    pub const ENV: &'static str = "GPUCARVE_GPU_UPLOAD";

    /// The path named by [`ENV`](Self::ENV), `Auto` when it is not set.
    pub fn from_env() -> Result<UploadPath, String> {
        match std::env::var(Self::ENV) {
            Ok(v) => v.parse().map_err(|e| format!("{}: {e}", Self::ENV)),
            Err(_) => Ok(UploadPath::Auto),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            UploadPath::Auto => "auto",
            UploadPath::InPlace => "in-place",
            UploadPath::DeviceCopy => "copy",
        }
    }
}

impl std::str::FromStr for UploadPath {
    type Err = String;
    fn from_str(s: &str) -> Result<UploadPath, String> {
        [
            UploadPath::Auto,
            UploadPath::InPlace,
            UploadPath::DeviceCopy,
        ]
        .into_iter()
        .find(|p| p.as_str() == s)
        .ok_or_else(|| format!("unknown upload path `{s}` (auto, in-place, copy)"))
    }
}

/// Tuning of a [`GpuEngine`]; `Default` suits the scan pipeline.
#[derive(Clone, Debug)]
pub struct GpuConfig {
    /// Concurrent searches (each with its own buffers); at least 1.
    pub slots: usize,
    /// Input buffer size of each slot, i.e. the largest haystack searched in
    /// one dispatch; clamped to the device's `maxStorageBufferRange`.
    pub slot_bytes: usize,
    /// Hit records each slot's results buffer holds before it first grows.
    pub initial_hit_capacity: usize,
    /// Most records a results buffer may grow to; clamped to the device's
    /// `maxStorageBufferRange` and 512 MiB. Past it, dispatches are split.
    pub max_hit_capacity: usize,
    /// Cap on the PFAC automaton's states (see [`PfacTable::build_with_limit`]).
    pub max_states: usize,
    /// How haystacks reach the shader.
    pub upload: UploadPath,
    /// Folder of the pipeline cache file (`None`: no cache); the default
    /// is [`default_cache_dir`](super::cache::default_cache_dir).
    pub pipeline_cache: Option<std::path::PathBuf>,
}

impl Default for GpuConfig {
    fn default() -> GpuConfig {
        GpuConfig {
            slots: 3,
            slot_bytes: 128 << 20,
            initial_hit_capacity: 1 << 16,
            max_hit_capacity: usize::MAX,
            max_states: crate::engine::pfac::DEFAULT_MAX_STATES,
            upload: UploadPath::Auto,
            pipeline_cache: super::cache::default_cache_dir(),
        }
    }
}

/// The buffers of one in-flight search.
struct Slot {
    /// Host-visible buffer for haystacks that lie outside staging memory
    /// (`slot_bytes`, a multiple of 4); allocated when first needed.
    host_input: Option<Subbuffer<[u8]>>,
    /// Device-local copy of the haystack (device-copy path only).
    device_input: Option<Subbuffer<[u8]>>,
    /// `[hit_count, saturated, (pattern, pos) × capacity]`, host-visible.
    results: Subbuffer<[u32]>,
    /// Records `results` holds.
    capacity: u64,
    /// Timestamps of the upload (0, 1) and of the dispatch (2, 3), when the
    /// queues can write them.
    queries: Option<Arc<QueryPool>>,
}

/// Queries of [`Slot::queries`].
const UPLOAD_QUERIES: Range<u32> = 0..2;
const DISPATCH_QUERIES: Range<u32> = 2..4;

/// Free slots; `search` blocks until one is free.
struct SlotPool {
    free: Mutex<Vec<Slot>>,
    returned: Condvar,
}

impl SlotPool {
    fn lock(&self) -> MutexGuard<'_, Vec<Slot>> {
        // A panicking holder cannot leave the Vec inconsistent (push/pop only).
        self.free.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn lease(&self, slot: Slot) -> Lease<'_> {
        Lease {
            pool: self,
            slot: Some(slot),
        }
    }

    /// A free slot, or `None` at once when every slot is in use.
    fn try_take(&self) -> Option<Lease<'_>> {
        let slot = self.lock().pop()?;
        Some(self.lease(slot))
    }

    fn take(&self) -> Lease<'_> {
        let mut free = self.lock();
        loop {
            if let Some(slot) = free.pop() {
                return self.lease(slot);
            }
            free = self
                .returned
                .wait(free)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }
}

/// A slot taken from the pool; given back on drop, errors and panics included.
struct Lease<'a> {
    pool: &'a SlotPool,
    slot: Option<Slot>,
}

impl Drop for Lease<'_> {
    fn drop(&mut self) {
        if let Some(slot) = self.slot.take() {
            self.pool.lock().push(slot);
            self.pool.returned.notify_one();
        }
    }
}

/// Work submitted to a queue, and everything it uses: kept alive until its
/// fence signals. Dropped unwaited (an error path), it waits; if waiting
/// fails (device lost), it leaks what it holds rather than free memory the
/// device might still touch.
struct Submitted {
    fence: Arc<Fence>,
    commands: Arc<PrimaryAutoCommandBuffer>,
    semaphores: Vec<Arc<Semaphore>>,
    waited: bool,
}

impl Submitted {
    fn wait(mut self, what: &'static str) -> Result<(), EngineError> {
        self.waited = true;
        let r = self.fence.wait(None);
        if r.is_err() {
            self.leak();
        }
        r.map_err(device_err(what))
    }

    fn leak(&mut self) {
        std::mem::forget(Arc::clone(&self.fence));
        std::mem::forget(Arc::clone(&self.commands));
        for s in &self.semaphores {
            std::mem::forget(Arc::clone(s));
        }
    }
}

impl Drop for Submitted {
    fn drop(&mut self) {
        if !self.waited && self.fence.wait(None).is_err() {
            self.leak();
        }
    }
}

/// A copy to device-local memory in flight: the dispatch waits on its
/// semaphore; the host waits on its fence to time the upload stage.
struct Upload {
    submitted: Submitted,
    done: Arc<Semaphore>,
    /// When it was submitted.
    since: Instant,
}

/// Maps any vulkano error of a search to [`EngineError::Device`].
fn device_err<E: Display>(what: &'static str) -> impl FnOnce(E) -> EngineError {
    move |e| EngineError::Device(format!("{what}: {}", one_line(e)))
}

/// Maps any vulkano error of the setup to [`GpuError::Init`].
fn init_err<E: Display>(what: &'static str) -> impl FnOnce(E) -> GpuError {
    move |e| GpuError::Init(format!("{what}: {}", one_line(e)))
}

/// PFAC on a Vulkan device.
///
/// # Buffers
///
/// Built once per engine:
/// * the table (transitions, per-state output ranges, output pattern ids),
///   uploaded through a staging buffer into device-local memory, read-only
///   and shared by every search;
/// * `slots` slots, each with a host-visible results buffer (hit counter +
///   records), a device-local input buffer on the device-copy path, and a
///   host-visible input buffer allocated when a haystack outside staging
///   memory first comes;
/// * staging memory for the pipeline's block pool, offered through
///   [`Engine::buffer_provider`] (see `staging.rs`): with it, blocks are read
///   (with `O_DIRECT`, by DMA) straight into memory the device reads.
///
/// # The path of a haystack
///
/// A haystack that lies in a staging buffer is bound where it lies: no copy
/// by the CPU. Any other haystack (a heap buffer, an mmap) is first copied
/// into the slot's host-visible input buffer (counted as a host copy). Then:
///
/// * [`UploadPath::InPlace`] (integrated GPUs, unified memory, lavapipe):
///   the shader reads that host-visible buffer;
/// * [`UploadPath::DeviceCopy`] (discrete GPUs): a `copy_buffer` on the
///   transfer queue (a dedicated transfer family, i.e. the DMA engine, when
///   the device has one) fills the slot's device-local input buffer and
///   signals a semaphore; the dispatch, submitted right behind it on the
///   compute queue, waits on that semaphore, so the two chain on the device
///   without a round trip through the host. The host waits on the copy's
///   fence only to time the upload stage.
///
/// Buffers used by both families are created with concurrent sharing (no
/// ownership transfers).
///
/// # Concurrency
///
/// Worker threads call [`Engine::search`] concurrently; each takes a free
/// slot (blocking while all are busy), uploads, dispatches and waits on the
/// dispatch's fence, then reads the hits back. With three slots and three or
/// more workers, the upload of block N+1 (DMA engine), the dispatch of block
/// N (compute queue) and the read-back of block N−1 (host) overlap;
/// [`Engine::search_profiled`] reports each stage's busy time, so the
/// overlap can be seen (`gpucarve bench`): compute (and uploads on the
/// compute queue) as the device's timestamps measured it, not counting time
/// queued behind other work; uploads on a transfer-only queue family (which
/// cannot reset timestamp queries) from submission to completion.
/// Submissions go to the queues directly (`vkQueueSubmit` with explicit
/// semaphores and fences); the slot discipline above, not vulkano's
/// resource tracking, orders host and device accesses.
///
/// # Overflow
///
/// The shader counts every hit but writes only those that fit. When the
/// count exceeds the slot's capacity, the slot's results buffer grows to the
/// next power of two above the count (and stays grown for later blocks) and
/// the dispatch runs again. When even the largest buffer the device allows
/// cannot hold the hits, the range of start offsets is halved and each half
/// runs separately, so every hit is always delivered, however dense.
pub struct GpuEngine {
    name: String,
    /// How long each set-up step took (seconds), in order.
    setup: Vec<(&'static str, f64)>,
    info: DeviceInfo,
    /// The compute queue.
    queue: Arc<Queue>,
    /// The queue of the device-copy path's uploads; `None` in place.
    transfer: Option<Arc<Queue>>,
    /// Families that share input buffers (one, or compute + transfer).
    families: Vec<u32>,
    pipeline: Arc<ComputePipeline>,
    memory: Arc<StandardMemoryAllocator>,
    descriptors: Arc<StandardDescriptorSetAllocator>,
    commands: Arc<StandardCommandBufferAllocator>,
    /// Transitions, out ranges (start, count interleaved), outputs.
    table: [Subbuffer<[u32]>; 3],
    states: usize,
    pool: SlotPool,
    staging: Option<Arc<StagingMemory>>,
    /// Why there is no staging memory, when there is none.
    staging_missing: Option<String>,
    slot_bytes: usize,
    /// `minStorageBufferOffsetAlignment`.
    offset_align: u64,
    /// Nanoseconds per timestamp tick, when the compute queue writes
    /// timestamps; stage times then come from the device.
    timestamp_period: Option<f64>,
    /// The valid bits of a timestamp.
    timestamp_mask: u64,
    /// Uploads are timed by the device too: only when they run on the
    /// compute queue (a transfer-only family cannot reset queries).
    upload_timed: bool,
    /// Longest walk minus one: how far a walk can read past its start.
    overlap: usize,
    /// Per pattern: leading wildcards, subtracted from the walk's start.
    shifts: Vec<u32>,
    max_shift: u64,
    patterns: usize,
    /// Largest results buffer, in records.
    max_capacity: u64,
    max_groups: u32,
    /// What became of the pipeline cache file in the set-up.
    pipeline_cache: CacheState,
    /// Slots in the pool (searches in flight at most).
    slots: usize,
}

/// The valid bits of the timestamps `family` writes, if it writes any.
fn timestamp_bits(d: &vulkano::device::physical::PhysicalDevice, family: u32) -> Option<u32> {
    if d.properties().timestamp_period <= 0.0 {
        return None;
    }
    d.queue_family_properties()
        .get(family as usize)?
        .timestamp_valid_bits
}

/// Records `commands` between two timestamps (`queries`) of the slot's
/// pool, reset first; just `commands` when the slot has no pool.
fn timed(
    builder: &mut AutoCommandBufferBuilder<PrimaryAutoCommandBuffer>,
    slot: &Slot,
    queries: Range<u32>,
    commands: impl FnOnce(
        &mut AutoCommandBufferBuilder<PrimaryAutoCommandBuffer>,
    ) -> Result<(), EngineError>,
) -> Result<(), EngineError> {
    let Some(pool) = &slot.queries else {
        return commands(builder);
    };
    // SAFETY: the queries belong to this slot, whose previous submissions
    // have all completed (a slot is used by one search at a time, which
    // waits on every fence): none is active or pending elsewhere; each is
    // reset before it is written.
    unsafe {
        builder
            .reset_query_pool(pool.clone(), queries.clone())
            .map_err(device_err("cannot reset the timestamps"))?
            .write_timestamp(pool.clone(), queries.start, PipelineStage::TopOfPipe)
            .map_err(device_err("cannot write a timestamp"))?;
    }
    commands(builder)?;
    // SAFETY: as above.
    unsafe {
        builder
            .write_timestamp(pool.clone(), queries.start + 1, PipelineStage::BottomOfPipe)
            .map_err(device_err("cannot write a timestamp"))?;
    }
    Ok(())
}

/// A queue family that transfers but neither computes nor draws: a DMA engine.
fn dedicated_transfer_family(d: &vulkano::device::physical::PhysicalDevice) -> Option<u32> {
    d.queue_family_properties()
        .iter()
        .position(|q| {
            q.queue_flags.intersects(QueueFlags::TRANSFER)
                && !q
                    .queue_flags
                    .intersects(QueueFlags::COMPUTE | QueueFlags::GRAPHICS)
        })
        .and_then(|i| u32::try_from(i).ok())
}

/// The engine's buffer sizes and dispatch limits on the chosen device.
struct BufferSizes {
    /// Input buffer size of each slot.
    slot_bytes: usize,
    /// `minStorageBufferOffsetAlignment`.
    offset_align: u64,
    /// Longest walk minus one.
    overlap: usize,
    /// Largest results buffer, in records.
    max_capacity: u64,
    max_groups: u32,
}

impl BufferSizes {
    /// The sizes `config` asks for, within what the device can bind in one
    /// buffer; an error when the table, the longest pattern or a results
    /// buffer for every pattern does not fit.
    fn fit(
        table: &PfacTable,
        patterns: usize,
        chosen: &Chosen,
        config: &GpuConfig,
    ) -> Result<BufferSizes, GpuError> {
        let props = chosen.device.properties();
        let max_range = u64::from(props.max_storage_buffer_range);
        let max_alloc = props.max_memory_allocation_size.unwrap_or(u64::MAX);
        let max_buffer = max_range.min(max_alloc);
        let max_groups = props.max_compute_work_group_count[0].clamp(1, MAX_GROUPS);
        let offset_align = props.min_storage_buffer_offset_alignment.as_devicesize();

        let too_big = |what: &str, bytes: usize| {
            GpuError::Build(format!(
                "the PFAC {what} ({} KiB) exceeds what {} can bind in one buffer ({} KiB); use fewer patterns or the CPU engine",
                bytes >> 10,
                chosen.info.name,
                max_buffer >> 10
            ))
        };
        if (table.transitions().len() * 4) as u64 > max_buffer {
            return Err(too_big("transition table", table.transitions().len() * 4));
        }
        if (table.outputs().len() * 4) as u64 > max_buffer {
            return Err(too_big("output list", table.outputs().len() * 4));
        }

        let slot_bytes =
            (config.slot_bytes.min(MAX_SLOT_BYTES) as u64).min(max_buffer) as usize & !3;
        let overlap = table.max_depth().saturating_sub(1);
        if slot_bytes <= overlap {
            return Err(GpuError::Build(format!(
                "a pattern of {} bytes does not fit the {slot_bytes}-byte input buffer",
                table.max_depth()
            )));
        }
        let max_capacity = ((max_buffer.min(MAX_RESULT_BYTES) / 8).saturating_sub(1))
            .min(config.max_hit_capacity as u64);
        if max_capacity < patterns as u64 {
            return Err(GpuError::Build(format!(
                "{} patterns can all match at one offset, more than a results buffer of {} can hold",
                patterns, chosen.info.name
            )));
        }
        Ok(BufferSizes {
            slot_bytes,
            offset_align,
            overlap,
            max_capacity,
            max_groups,
        })
    }
}

/// The logical device opened on the chosen one, with its queues.
struct OpenedDevice {
    device: Arc<Device>,
    /// The compute queue.
    queue: Arc<Queue>,
    /// The device-copy path's upload queue (`None` in place).
    transfer: Option<Arc<Queue>>,
    /// The dedicated transfer family the uploads use, if any.
    transfer_family: Option<u32>,
    /// Whether host memory import (staging buffers) is enabled.
    import: bool,
}

impl OpenedDevice {
    /// Opens the device with a compute queue, a transfer queue for the
    /// device-copy path (a dedicated family's when there is one) and host
    /// memory import where Vulkan 1.1's external memory allows it.
    fn open(chosen: &Chosen, upload: UploadPath) -> Result<OpenedDevice, GpuError> {
        let transfer_family = (upload == UploadPath::DeviceCopy)
            .then(|| dedicated_transfer_family(&chosen.device))
            .flatten();
        let mut queue_create_infos = vec![QueueCreateInfo {
            queue_family_index: chosen.queue_family,
            ..Default::default()
        }];
        if let Some(f) = transfer_family {
            queue_create_infos.push(QueueCreateInfo {
                queue_family_index: f,
                ..Default::default()
            });
        }
        // Host memory import (staging buffers) needs Vulkan 1.1's external memory.
        let import = chosen.device.api_version() >= Version::V1_1
            && chosen
                .device
                .supported_extensions()
                .ext_external_memory_host;
        let (device, mut queues) = Device::new(
            chosen.device.clone(),
            DeviceCreateInfo {
                queue_create_infos,
                enabled_extensions: DeviceExtensions {
                    ext_external_memory_host: import,
                    ..DeviceExtensions::empty()
                },
                ..Default::default()
            },
        )
        .map_err(init_err("cannot open the Vulkan device"))?;
        let queue = queues
            .next()
            .ok_or_else(|| GpuError::Init("the Vulkan device returned no queue".into()))?;
        let transfer = match (upload, transfer_family) {
            (UploadPath::DeviceCopy, Some(_)) => Some(queues.next().ok_or_else(|| {
                GpuError::Init("the Vulkan device returned no transfer queue".into())
            })?),
            (UploadPath::DeviceCopy, None) => Some(queue.clone()),
            _ => None,
        };
        Ok(OpenedDevice {
            device,
            queue,
            transfer,
            transfer_family,
            import,
        })
    }
}

/// The staging memory for host-imported input buffers, or why there is
/// none; `path` (how haystacks reach the device) is named in its errors.
fn staging_memory(
    device: &Arc<Device>,
    families: &[u32],
    (transfer, transfer_family): (&Option<Arc<Queue>>, Option<u32>),
    import: bool,
    chosen: &Chosen,
) -> (Option<Arc<StagingMemory>>, Option<String>) {
    let path = match (transfer, transfer_family) {
        (None, _) => "searched in place".to_string(),
        (Some(_), Some(f)) => {
            format!("copied to device-local memory on transfer queue family {f}")
        }
        (Some(_), None) => "copied to device-local memory on the compute queue".to_string(),
    };
    if import {
        match StagingMemory::new(device.clone(), families.to_vec(), &path) {
            Ok(s) => (Some(Arc::new(s)), None),
            Err(e) => (None, Some(e)),
        }
    } else {
        (
            None,
            Some(format!(
                "{} does not support VK_EXT_external_memory_host",
                chosen.info.name
            )),
        )
    }
}

impl GpuEngine {
    /// Builds the table for `patterns` and sets up the device chosen by
    /// `choice`. `allow_software` lets a CPU-type device (llvmpipe) run the
    /// engine: true for an explicit `--engine gpu`, false for `--engine auto`.
    pub fn new(
        patterns: &[Pattern],
        choice: DeviceChoice,
        allow_software: bool,
    ) -> Result<GpuEngine, GpuError> {
        GpuEngine::with_config(patterns, choice, allow_software, GpuConfig::default())
    }

    /// [`new`](Self::new) with explicit tuning.
    pub fn with_config(
        patterns: &[Pattern],
        choice: DeviceChoice,
        allow_software: bool,
        config: GpuConfig,
    ) -> Result<GpuEngine, GpuError> {
        let mut steps = SetupClock::start();
        let table = PfacTable::build_with_limit(patterns, config.max_states)
            .map_err(|e| GpuError::Build(e.to_string()))?;
        steps.lap("pfac table");
        let instance = open_instance()?;
        steps.lap("instance");
        let chosen = choose(&instance, &choice, allow_software)?;
        let props = chosen.device.properties();
        let sizes = BufferSizes::fit(&table, patterns.len(), &chosen, &config)?;

        let upload = match config.upload {
            UploadPath::Auto if props.device_type == PhysicalDeviceType::DiscreteGpu => {
                UploadPath::DeviceCopy
            }
            UploadPath::Auto => UploadPath::InPlace,
            other => other,
        };
        steps.lap("choose device");
        let opened = OpenedDevice::open(&chosen, upload)?;
        steps.lap("device");
        let queue = opened.queue;
        let transfer = opened.transfer;
        let transfer_family = opened.transfer_family;
        let device = opened.device;
        let timestamp_valid = timestamp_bits(&chosen.device, queue.queue_family_index());
        let timestamp_period = timestamp_valid.map(|_| f64::from(props.timestamp_period));
        let timestamp_mask = match timestamp_valid {
            Some(b) if b < 64 => (1u64 << b) - 1,
            _ => u64::MAX,
        };
        let upload_timed = timestamp_period.is_some() && transfer_family.is_none();
        let mut families = vec![queue.queue_family_index()];
        if let Some(t) = &transfer
            && t.queue_family_index() != queue.queue_family_index()
        {
            families.push(t.queue_family_index());
        }
        let (staging, staging_missing) = staging_memory(
            &device,
            &families,
            (&transfer, transfer_family),
            opened.import,
            &chosen,
        );

        steps.lap("staging memory");
        let cache_file = config.pipeline_cache.as_deref().map(|dir| {
            PipelineCacheFile::new(
                dir,
                CacheKey {
                    vendor_id: props.vendor_id,
                    device_id: props.device_id,
                    driver_version: props.driver_version,
                    uuid: props.pipeline_cache_uuid,
                },
            )
        });
        let (pipeline, pipeline_cache) = create_pipeline(&device, cache_file.as_ref())?;
        steps.lap(match pipeline_cache {
            CacheState::Loaded(_) => "pipeline (warm cache)",
            CacheState::Off => "pipeline (no cache)",
            CacheState::Cold | CacheState::Ignored(_) => "pipeline (cold cache)",
        });
        let memory = Arc::new(StandardMemoryAllocator::new_default(device.clone()));
        let descriptors = Arc::new(StandardDescriptorSetAllocator::new(
            device.clone(),
            Default::default(),
        ));
        let commands = Arc::new(StandardCommandBufferAllocator::new(
            device.clone(),
            Default::default(),
        ));

        let ranges: Vec<u32> = table
            .out_start()
            .iter()
            .zip(table.out_count())
            .flat_map(|(&s, &c)| [s, c])
            .collect();
        let table_buffers = upload_table(
            &memory,
            &commands,
            &queue,
            [table.transitions(), &ranges, table.outputs()],
        )?;
        steps.lap("table upload");

        let mut engine = GpuEngine {
            name: format!("gpu:{}", chosen.info.name),
            setup: Vec::new(),
            info: chosen.info,
            queue,
            transfer,
            families,
            pipeline,
            memory,
            descriptors,
            commands,
            table: table_buffers,
            states: table.state_count(),
            pool: SlotPool {
                free: Mutex::new(Vec::new()),
                returned: Condvar::new(),
            },
            staging,
            staging_missing,
            slot_bytes: sizes.slot_bytes,
            offset_align: sizes.offset_align,
            timestamp_period,
            timestamp_mask,
            upload_timed,
            overlap: sizes.overlap,
            shifts: table.shifts().to_vec(),
            max_shift: table.max_shift() as u64,
            patterns: patterns.len(),
            max_capacity: sizes.max_capacity,
            max_groups: sizes.max_groups,
            pipeline_cache,
            slots: config.slots.max(1),
        };
        engine.fill_pool(&config)?;
        steps.lap("slots");
        engine.setup = steps.steps;
        Ok(engine)
    }

    /// Creates the engine's slots (`config.slots`, at least one), their
    /// results buffers holding `config.initial_hit_capacity` records.
    fn fill_pool(&mut self, config: &GpuConfig) -> Result<(), GpuError> {
        let capacity =
            (config.initial_hit_capacity as u64).clamp(self.patterns as u64, self.max_capacity);
        let mut slots = Vec::new();
        for _ in 0..config.slots.max(1) {
            slots.push(
                self.new_slot(capacity)
                    .map_err(|e| GpuError::Init(e.to_string()))?,
            );
        }
        self.pool.free = Mutex::new(slots);
        Ok(())
    }

    /// What became of the pipeline cache file in the set-up: off, cold
    /// (compiled), loaded, or ignored (and why).
    pub fn pipeline_cache(&self) -> &CacheState {
        &self.pipeline_cache
    }

    /// The device the engine runs on.
    pub fn device_info(&self) -> &DeviceInfo {
        &self.info
    }

    /// Number of states of the PFAC automaton.
    pub fn state_count(&self) -> usize {
        self.states
    }

    /// The largest haystack one dispatch searches: the slot input buffer,
    /// itself bounded by `maxStorageBufferRange` (128 MiB on llvmpipe). The
    /// pipeline should pass blocks no larger than this; a larger haystack is
    /// still searched correctly, in overlapping windows.
    pub fn max_haystack_len(&self) -> usize {
        self.slot_bytes
    }

    /// The path haystacks take to the shader (never `Auto`).
    pub fn upload_path(&self) -> UploadPath {
        if self.transfer.is_some() {
            UploadPath::DeviceCopy
        } else {
            UploadPath::InPlace
        }
    }

    /// The staging memory offered to the pipeline, or why there is none.
    pub fn staging(&self) -> Result<String, String> {
        match (&self.staging, &self.staging_missing) {
            (Some(s), _) => Ok(s.describe()),
            (None, Some(why)) => Err(why.clone()),
            (None, None) => Err("no staging memory".into()),
        }
    }

    /// `info`, shared by the engine's queue families when there are two
    /// (concurrent sharing: no ownership transfers).
    fn shared(&self, mut info: BufferCreateInfo) -> BufferCreateInfo {
        if self.families.len() > 1 {
            info.sharing = Sharing::Concurrent(self.families.clone().into());
        }
        info
    }

    fn new_slot(&self, capacity: u64) -> Result<Slot, EngineError> {
        let device_input = match self.transfer {
            Some(_) => Some(
                Buffer::new_slice::<u8>(
                    self.memory.clone(),
                    self.shared(BufferCreateInfo {
                        usage: BufferUsage::STORAGE_BUFFER | BufferUsage::TRANSFER_DST,
                        ..Default::default()
                    }),
                    AllocationCreateInfo {
                        memory_type_filter: MemoryTypeFilter::PREFER_DEVICE,
                        ..Default::default()
                    },
                    self.slot_bytes as u64,
                )
                .map_err(device_err("cannot allocate a device-local input buffer"))?,
            ),
            None => None,
        };
        let queries = match self.timestamp_period {
            Some(_) => Some(
                QueryPool::new(
                    self.queue.device().clone(),
                    QueryPoolCreateInfo {
                        query_count: DISPATCH_QUERIES.end,
                        ..QueryPoolCreateInfo::query_type(QueryType::Timestamp)
                    },
                )
                .map_err(device_err("cannot create a timestamp query pool"))?,
            ),
            None => None,
        };
        Ok(Slot {
            host_input: None,
            device_input,
            results: self.new_results(capacity)?,
            capacity,
            queries,
        })
    }

    /// The slot's host-visible input buffer, allocated on first use.
    fn host_input(&self, slot: &mut Slot) -> Result<Subbuffer<[u8]>, EngineError> {
        if let Some(b) = &slot.host_input {
            return Ok(b.clone());
        }
        // In place, the shader reads it: device-local if the host can write
        // there (resizable BAR, integrated GPUs), else host memory read
        // across the bus. For a device copy it is only the copy's source.
        let placement = if self.transfer.is_some() {
            MemoryTypeFilter::PREFER_HOST
        } else {
            MemoryTypeFilter::PREFER_DEVICE
        };
        let b = Buffer::new_slice::<u8>(
            self.memory.clone(),
            self.shared(BufferCreateInfo {
                usage: BufferUsage::STORAGE_BUFFER | BufferUsage::TRANSFER_SRC,
                ..Default::default()
            }),
            AllocationCreateInfo {
                memory_type_filter: placement | MemoryTypeFilter::HOST_SEQUENTIAL_WRITE,
                ..Default::default()
            },
            self.slot_bytes as u64,
        )
        .map_err(device_err("cannot allocate an input buffer"))?;
        slot.host_input = Some(b.clone());
        Ok(b)
    }

    /// A results buffer for `capacity` records.
    fn new_results(&self, capacity: u64) -> Result<Subbuffer<[u32]>, EngineError> {
        Buffer::new_slice::<u32>(
            self.memory.clone(),
            BufferCreateInfo {
                usage: BufferUsage::STORAGE_BUFFER,
                ..Default::default()
            },
            AllocationCreateInfo {
                memory_type_filter: MemoryTypeFilter::PREFER_DEVICE
                    | MemoryTypeFilter::HOST_RANDOM_ACCESS,
                ..Default::default()
            },
            RESULT_HEADER_WORDS + 2 * capacity,
        )
        .map_err(device_err("cannot allocate a results buffer"))
    }

    /// Replaces the slot's results buffer with one for at least `count` records.
    fn grow(&self, slot: &mut Slot, count: u64) -> Result<(), EngineError> {
        let capacity = count
            .next_power_of_two()
            .max(slot.capacity * 2)
            .min(self.max_capacity);
        slot.results = self.new_results(capacity)?;
        slot.capacity = capacity;
        Ok(())
    }

    /// Submits `commands` to `queue` with a fresh fence, waiting on `wait`
    /// and signalling `signal`.
    fn submit(
        &self,
        queue: &Arc<Queue>,
        commands: Arc<PrimaryAutoCommandBuffer>,
        wait: Option<Arc<Semaphore>>,
        signal: Option<Arc<Semaphore>>,
    ) -> Result<Submitted, EngineError> {
        let fence = Arc::new(
            Fence::new(self.queue.device().clone(), FenceCreateInfo::default())
                .map_err(device_err("cannot create a fence"))?,
        );
        let info = SubmitInfo {
            wait_semaphores: wait
                .iter()
                .map(|s| SemaphoreSubmitInfo {
                    // All commands, timestamps included, wait for the upload.
                    stages: PipelineStages::ALL_COMMANDS,
                    ..SemaphoreSubmitInfo::new(s.clone())
                })
                .collect(),
            command_buffers: vec![CommandBufferSubmitInfo::new(commands.clone())],
            signal_semaphores: signal
                .iter()
                .map(|s| SemaphoreSubmitInfo::new(s.clone()))
                .collect(),
            ..Default::default()
        };
        // SAFETY (vkQueueSubmit's requirements, see QueueGuard::submit):
        // * the command buffer, every resource it uses (kept alive by it),
        //   the semaphores and the fence are held by the returned
        //   `Submitted` until the fence has signalled (or leaked if waiting
        //   fails);
        // * the command buffer is one-time-submit and built just before;
        // * a waited semaphore was signalled by a submission made earlier
        //   (the upload, see `search_window`); a signalled one is new;
        // * buffers have no layouts; every other access is ordered by the
        //   slot discipline: a slot's buffers are touched by one search at a
        //   time, the host writes them only before submitting and reads
        //   them only after the fence; staging memory is not written while a
        //   search borrows it (the haystack borrow), and the table is read-only.
        unsafe { queue.with(|mut q| q.submit(&[info], Some(&fence))) }
            .map_err(device_err("cannot submit"))?;
        let semaphores = wait.into_iter().chain(signal).collect();
        Ok(Submitted {
            fence,
            commands,
            semaphores,
            waited: false,
        })
    }

    /// Starts the copy of `source` into the slot's device-local input.
    fn start_upload(
        &self,
        transfer: &Arc<Queue>,
        source: Subbuffer<[u8]>,
        slot: &Slot,
    ) -> Result<(Subbuffer<[u8]>, Upload), EngineError> {
        let device_input = slot
            .device_input
            .clone()
            .ok_or_else(|| EngineError::Device("no device-local input buffer".into()))?;
        let target = device_input.slice(0..source.size());
        let mut builder = AutoCommandBufferBuilder::primary(
            self.commands.clone(),
            transfer.queue_family_index(),
            CommandBufferUsage::OneTimeSubmit,
        )
        .map_err(device_err("cannot allocate a command buffer"))?;
        let copy = CopyBufferInfo::buffers(source, target.clone());
        let record = |b: &mut AutoCommandBufferBuilder<PrimaryAutoCommandBuffer>| {
            b.copy_buffer(copy)
                .map(|_| ())
                .map_err(device_err("cannot record the upload"))
        };
        if self.upload_timed {
            timed(&mut builder, slot, UPLOAD_QUERIES, record)?;
        } else {
            record(&mut builder)?;
        }
        let commands = builder
            .build()
            .map_err(device_err("cannot record the upload"))?;
        let done = Arc::new(
            Semaphore::new(self.queue.device().clone(), SemaphoreCreateInfo::default())
                .map_err(device_err("cannot create a semaphore"))?,
        );
        let since = Instant::now();
        let submitted = self.submit(transfer, commands, None, Some(done.clone()))?;
        Ok((
            target,
            Upload {
                submitted,
                done,
                since,
            },
        ))
    }

    /// Runs the shader over starts `begin..end` of the haystack (of `len`
    /// bytes) in `input`, after `upload` if one is in flight. Returns the
    /// hit counter, or `None` when it passed 2^31 (its true value is then
    /// unknown).
    #[allow(clippy::too_many_arguments)]
    fn dispatch(
        &self,
        slot: &Slot,
        input: &Subbuffer<[u8]>,
        len: u32,
        begin: u32,
        end: u32,
        upload: Option<Upload>,
        clock: &StageClock,
    ) -> Result<Option<u64>, EngineError> {
        let mut since = Instant::now();
        {
            let header = slot.results.clone().slice(0..RESULT_HEADER_WORDS);
            let mut header = header
                .write()
                .map_err(device_err("cannot reset the hit counter"))?;
            header.fill(0);
        }
        let capacity = u32::try_from(slot.capacity).unwrap_or(u32::MAX);
        let layout = self.pipeline.layout().clone();
        let set_layout = layout
            .set_layouts()
            .first()
            .ok_or_else(|| EngineError::Device("the PFAC pipeline has no descriptor set".into()))?
            .clone();
        let [transitions, ranges, outputs] = &self.table;
        let set = DescriptorSet::new(
            self.descriptors.clone(),
            set_layout,
            [
                WriteDescriptorSet::buffer(0, input.clone()),
                WriteDescriptorSet::buffer(1, transitions.clone()),
                WriteDescriptorSet::buffer(2, ranges.clone()),
                WriteDescriptorSet::buffer(3, outputs.clone()),
                WriteDescriptorSet::buffer(4, slot.results.clone()),
            ],
            [],
        )
        .map_err(device_err("cannot create a descriptor set"))?;
        let mut builder = AutoCommandBufferBuilder::primary(
            self.commands.clone(),
            self.queue.queue_family_index(),
            CommandBufferUsage::OneTimeSubmit,
        )
        .map_err(device_err("cannot allocate a command buffer"))?;
        let groups = u64::from(end - begin)
            .div_ceil(WORKGROUP_SIZE * STARTS_PER_INVOCATION)
            .clamp(1, u64::from(self.max_groups)) as u32;
        timed(&mut builder, slot, DISPATCH_QUERIES, |b| {
            b.bind_pipeline_compute(self.pipeline.clone())
                .map_err(device_err("bind pipeline"))?
                .bind_descriptor_sets(PipelineBindPoint::Compute, layout.clone(), 0, set)
                .map_err(device_err("bind descriptor set"))?
                .push_constants(layout, 0, [len, begin, end, capacity])
                .map_err(device_err("push constants"))?;
            // SAFETY: vulkano's shader safety requirements ask that the
            // shader stay inside the bound buffers. It does: haystack words
            // are read only for byte indices < `len`, and the input binding
            // holds `len` bytes rounded up to 4 (callers); every state index
            // comes from the table, whose transitions only name states <
            // state count (asserted by the pfac tests), and output ranges
            // index within `outputs`; records are written only at indices <
            // `capacity`, the number the results buffer holds after its two
            // header words. `end <= len` (callers).
            unsafe { b.dispatch([groups, 1, 1]) }
                .map(|_| ())
                .map_err(device_err("dispatch"))
        })?;
        let commands = builder
            .build()
            .map_err(device_err("cannot build the command buffer"))?;
        let wait = upload.as_ref().map(|u| u.done.clone());
        let submitted = self.submit(&self.queue, commands, wait, None)?;
        // The dispatch is queued behind the upload on the device; the host
        // waits for the upload only to time its stage.
        if let Some(u) = upload {
            u.submitted.wait("the upload failed on the device")?;
            let queries = self.upload_timed.then_some(UPLOAD_QUERIES);
            let (a, b) = self.device_interval(slot, queries, u.since);
            clock.add_interval(Stage::Upload, a, b);
            since = since.max(b);
        }
        submitted.wait("the search failed on the device")?;
        let (a, b) = self.device_interval(slot, Some(DISPATCH_QUERIES), since);
        clock.add_interval(Stage::Compute, a, b);
        let _busy = clock.enter(Stage::Readback);
        let header = slot.results.clone().slice(0..RESULT_HEADER_WORDS);
        let header = header
            .read()
            .map_err(device_err("cannot read the hit counter"))?;
        Ok((header[1] == 0).then_some(u64::from(header[0])))
    }

    /// When the device ran the commands timed by `queries` (written by the
    /// submission whose fence was just waited on), on the host's clock: they
    /// ended by now, and began their device-measured duration earlier, but
    /// not before `since` (their submission). Without timestamps: `since`
    /// to now, queueing included.
    fn device_interval(
        &self,
        slot: &Slot,
        queries: Option<Range<u32>>,
        since: Instant,
    ) -> (Instant, Instant) {
        let now = Instant::now();
        let mut ticks = [0u64; 2];
        let measured = match (&slot.queries, self.timestamp_period, queries) {
            (Some(pool), Some(period), Some(queries)) => pool
                .get_results(queries, &mut ticks, QueryResultFlags::empty())
                .ok()
                .filter(|&available| available)
                .map(|_| {
                    let ticks = ticks[1].wrapping_sub(ticks[0]) & self.timestamp_mask;
                    Duration::from_nanos((ticks as f64 * period) as u64)
                }),
            _ => None,
        };
        match measured.and_then(|d| now.checked_sub(d)) {
            Some(start) => (start.max(since), now),
            None => (since, now),
        }
    }

    /// Appends the first `count` records of the slot to `packed`, as
    /// `(pos - base + max_shift) << 32 | pattern`, which sorts by (pos,
    /// pattern); `base` is the haystack offset of the window.
    fn read_hits(
        &self,
        slot: &Slot,
        count: u64,
        base: usize,
        packed: &mut Vec<u64>,
    ) -> Result<(), EngineError> {
        if count == 0 {
            return Ok(());
        }
        let records = slot
            .results
            .clone()
            .slice(RESULT_HEADER_WORDS..RESULT_HEADER_WORDS + 2 * count);
        let words = records.read().map_err(device_err("cannot read the hits"))?;
        // A record is (pattern, walk start). The pattern begins `shift`
        // bytes before the walk's start (its leading wildcards); a pattern
        // that would begin before the haystack is no hit.
        let base = base as u64;
        for r in words.chunks_exact(2) {
            let (pattern, start) = (r[0], u64::from(r[1]));
            let shift = u64::from(self.shifts.get(pattern as usize).copied().ok_or_else(|| {
                EngineError::Device(format!("the device reported unknown pattern {pattern}"))
            })?);
            if base + start >= shift {
                packed.push((start + self.max_shift - shift) << 32 | u64::from(pattern));
            }
        }
        Ok(())
    }

    /// Searches `window` (at most `slot_bytes`), reporting only hits that
    /// start in `0..starts_end`, with positions offset by `base`.
    fn search_window(
        &self,
        slot: &mut Slot,
        window: &[u8],
        starts_end: usize,
        base: usize,
        out: &mut Vec<Hit>,
        clock: &StageClock,
    ) -> Result<(), EngineError> {
        let len = u32::try_from(window.len())
            .map_err(|_| EngineError::Device("window over 4 GiB".into()))?;
        let starts_end = u32::try_from(starts_end.min(window.len())).unwrap_or(len);
        let padded = window.len().next_multiple_of(4) as u64;

        // Where the device can read the window: where it lies (staging
        // memory), or in the slot's own buffer after a copy by the CPU.
        // The staging buffer is used only within this call, while `window`
        // is borrowed (see StagingMemory::find).
        let staged = self
            .staging
            .as_ref()
            .and_then(|s| s.find(window, self.offset_align));
        let source = match staged {
            Some(s) => s,
            None => {
                let _busy = clock.enter(Stage::Upload);
                let buf = self.host_input(slot)?.slice(0..padded);
                {
                    let mut w = buf
                        .write()
                        .map_err(device_err("cannot write the input buffer"))?;
                    w[..window.len()].copy_from_slice(window);
                }
                clock.add_host_copy(window.len() as u64);
                buf
            }
        };
        let (input, mut upload) = match &self.transfer {
            Some(transfer) => {
                let (input, upload) = self.start_upload(transfer, source, slot)?;
                (input, Some(upload))
            }
            None => (source, None),
        };

        let mut packed: Vec<u64> = Vec::new();
        let mut ranges = vec![(0u32, starts_end)];
        while let Some((begin, end)) = ranges.pop() {
            let count = self.dispatch(slot, &input, len, begin, end, upload.take(), clock)?;
            match count {
                Some(count) if count <= slot.capacity => {
                    let _busy = clock.enter(Stage::Readback);
                    self.read_hits(slot, count, base, &mut packed)?;
                    continue;
                }
                // Too many for this buffer, but one buffer could hold them:
                // grow (for good) and run the same range again.
                Some(count) if count <= self.max_capacity && self.grow(slot, count).is_ok() => {
                    ranges.push((begin, end));
                    continue;
                }
                _ => {}
            }
            // More hits than the largest buffer holds (or it could not be
            // allocated): split the start range.
            if end - begin <= 1 {
                return Err(EngineError::Device(format!(
                    "more hits at offset {} than a results buffer of {} records can hold",
                    base + begin as usize,
                    slot.capacity
                )));
            }
            let mid = begin + (end - begin) / 2;
            ranges.push((mid, end));
            ranges.push((begin, mid));
        }
        let _busy = clock.enter(Stage::Readback);
        packed.sort_unstable();
        let max_shift = self.max_shift as usize;
        out.extend(packed.iter().map(|&x| Hit {
            pos: base + (x >> 32) as usize - max_shift,
            pattern: x as PatternId,
        }));
        Ok(())
    }
}

/// The set-up's steps, timed one after the other.
struct SetupClock {
    at: Instant,
    steps: Vec<(&'static str, f64)>,
}

impl SetupClock {
    fn start() -> Self {
        SetupClock {
            at: Instant::now(),
            steps: Vec::new(),
        }
    }

    /// The step `name` ended now.
    fn lap(&mut self, name: &'static str) {
        let now = Instant::now();
        self.steps.push((name, (now - self.at).as_secs_f64()));
        self.at = now;
    }
}

impl Engine for GpuEngine {
    fn setup_steps(&self) -> Vec<(&'static str, f64)> {
        self.setup.clone()
    }

    fn name(&self) -> String {
        self.name.clone()
    }

    fn search(&self, haystack: &[u8], out: &mut Vec<Hit>) -> Result<(), EngineError> {
        self.search_profiled(haystack, out, &StageClock::new())
    }

    fn search_profiled(
        &self,
        haystack: &[u8],
        out: &mut Vec<Hit>,
        clock: &StageClock,
    ) -> Result<(), EngineError> {
        if haystack.is_empty() {
            return Ok(());
        }
        self.search_leased(self.pool.take(), haystack, out, clock)
    }

    fn try_search_profiled(
        &self,
        haystack: &[u8],
        out: &mut Vec<Hit>,
        clock: &StageClock,
    ) -> Option<Result<(), EngineError>> {
        if haystack.is_empty() {
            return Some(Ok(()));
        }
        let lease = self.pool.try_take()?;
        Some(self.search_leased(lease, haystack, out, clock))
    }

    fn max_haystack_len(&self) -> Option<usize> {
        Some(self.slot_bytes)
    }

    fn default_block_size(&self) -> usize {
        crate::engine::DEFAULT_BLOCK_SIZE
    }

    fn buffer_provider(&self) -> Option<Arc<dyn BufferProvider>> {
        self.staging
            .as_ref()
            .map(|s| Arc::clone(s) as Arc<dyn BufferProvider>)
    }

    /// The ring: a buffer for each slot's search in flight, and two more
    /// for the blocks being read meanwhile, within the staging budget.
    fn buffers_in_flight(&self, buffer_bytes: usize) -> Option<usize> {
        Some(crate::engine::ring_buffers(self.slots + 2, buffer_bytes))
    }
}

impl GpuEngine {
    /// Searches `haystack` (not empty) with the slot `lease` holds.
    fn search_leased(
        &self,
        mut lease: Lease<'_>,
        haystack: &[u8],
        out: &mut Vec<Hit>,
        clock: &StageClock,
    ) -> Result<(), EngineError> {
        let slot = lease
            .slot
            .as_mut()
            .ok_or_else(|| EngineError::Device("slot pool corrupted".into()))?;
        // One window when the haystack fits the slot (the normal case);
        // otherwise overlapping windows, each owning the walk starts before
        // its last `overlap` bytes (the next window re-reads those).
        let first = out.len();
        let mut windows = 0;
        let mut begin = 0;
        while begin < haystack.len() {
            let end = (begin + self.slot_bytes).min(haystack.len());
            let starts_end = if end == haystack.len() {
                end
            } else {
                end - self.overlap
            };
            self.search_window(
                slot,
                &haystack[begin..end],
                starts_end - begin,
                begin,
                out,
                clock,
            )?;
            windows += 1;
            begin = starts_end;
        }
        // A pattern with leading wildcards found early in one window can
        // begin before hits the previous window reported.
        if windows > 1 {
            out[first..].sort_unstable();
        }
        Ok(())
    }
}

impl std::fmt::Debug for GpuEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuEngine")
            .field("device", &self.info.name)
            .field("states", &self.states)
            .field("patterns", &self.patterns)
            .field("slot_bytes", &self.slot_bytes)
            .field("upload", &self.upload_path())
            .field("staging", &self.staging.is_some())
            .finish_non_exhaustive()
    }
}

/// Loads the SPIR-V and builds the compute pipeline (layout reflected from
/// it), through the driver's pipeline cache started from `cache`'s file;
/// saves the cache's data back when it changed. Nothing about the cache
/// fails the set-up.
fn create_pipeline(
    device: &Arc<Device>,
    cache: Option<&PipelineCacheFile>,
) -> Result<(Arc<ComputePipeline>, CacheState), GpuError> {
    let (initial_data, mut state) = match cache {
        Some(c) => c.load(),
        None => (Vec::new(), CacheState::Off),
    };
    let driver_cache = match cache {
        None => None,
        Some(_) => {
            let info = PipelineCacheCreateInfo {
                initial_data: initial_data.clone(),
                ..Default::default()
            };
            // SAFETY: the data is empty, or a file whose header names this
            // device, driver and pipeline cache UUID (checked by `load`);
            // Vulkan requires drivers to validate the rest and to ignore
            // data they cannot use (vkCreatePipelineCache, "If
            // pInitialData is not compatible ... the cache is empty").
            match unsafe { PipelineCache::new(device.clone(), info) } {
                Ok(c) => Some(c),
                Err(e) => {
                    state = CacheState::Ignored(format!("driver refused it: {}", one_line(e)));
                    None
                }
            }
        }
    };
    let words = vulkano::shader::spirv::bytes_to_words(PFAC_SPIRV)
        .map_err(init_err("corrupt PFAC SPIR-V"))?;
    // SAFETY: the code is `shaders/pfac.comp` compiled by glslc or
    // glslangValidator in build.rs (or the committed copy that
    // .ci/check-spirv keeps identical to glslc's output), i.e. valid SPIR-V;
    // vulkano still parses it and checks its capabilities against the device.
    let module = unsafe { ShaderModule::new(device.clone(), ShaderModuleCreateInfo::new(&words)) }
        .map_err(init_err("cannot load the PFAC shader"))?;
    let entry = module
        .entry_point("main")
        .ok_or_else(|| GpuError::Init("the PFAC shader has no `main`".into()))?;
    let stage = PipelineShaderStageCreateInfo::new(entry);
    let layout_info = PipelineDescriptorSetLayoutCreateInfo::from_stages([&stage])
        .into_pipeline_layout_create_info(device.clone())
        .map_err(|e| GpuError::Init(format!("PFAC pipeline layout: {}", one_line(e.error))))?;
    let layout = PipelineLayout::new(device.clone(), layout_info)
        .map_err(init_err("PFAC pipeline layout"))?;
    let pipeline = ComputePipeline::new(
        device.clone(),
        driver_cache.clone(),
        ComputePipelineCreateInfo::stage_layout(stage, layout),
    )
    .map_err(init_err("cannot create the PFAC pipeline"))?;
    if let (Some(file), Some(driver_cache)) = (cache, &driver_cache)
        && let Ok(data) = driver_cache.get_data()
    {
        file.save(&data, &initial_data);
    }
    Ok((pipeline, state))
}

/// Copies the table arrays into device-local buffers through staging buffers.
fn upload_table(
    memory: &Arc<StandardMemoryAllocator>,
    commands: &Arc<StandardCommandBufferAllocator>,
    queue: &Arc<Queue>,
    parts: [&[u32]; 3],
) -> Result<[Subbuffer<[u32]>; 3], GpuError> {
    let mut builder = AutoCommandBufferBuilder::primary(
        commands.clone(),
        queue.queue_family_index(),
        CommandBufferUsage::OneTimeSubmit,
    )
    .map_err(init_err("cannot allocate a command buffer"))?;
    let mut out = Vec::with_capacity(3);
    for data in parts {
        // Buffers cannot be empty; a lone padding word is never read.
        let len = data.len().max(1) as u64;
        let staging = Buffer::new_slice::<u32>(
            memory.clone(),
            BufferCreateInfo {
                usage: BufferUsage::TRANSFER_SRC,
                ..Default::default()
            },
            AllocationCreateInfo {
                memory_type_filter: MemoryTypeFilter::PREFER_HOST
                    | MemoryTypeFilter::HOST_SEQUENTIAL_WRITE,
                ..Default::default()
            },
            len,
        )
        .map_err(init_err("cannot allocate a staging buffer"))?;
        {
            let mut w = staging
                .write()
                .map_err(init_err("cannot write a staging buffer"))?;
            w.fill(0);
            w[..data.len()].copy_from_slice(data);
        }
        let table = Buffer::new_slice::<u32>(
            memory.clone(),
            BufferCreateInfo {
                usage: BufferUsage::STORAGE_BUFFER | BufferUsage::TRANSFER_DST,
                ..Default::default()
            },
            AllocationCreateInfo {
                memory_type_filter: MemoryTypeFilter::PREFER_DEVICE,
                ..Default::default()
            },
            len,
        )
        .map_err(init_err("cannot allocate the PFAC table"))?;
        builder
            .copy_buffer(CopyBufferInfo::buffers(staging, table.clone()))
            .map_err(init_err("cannot record the table upload"))?;
        out.push(table);
    }
    let upload = builder
        .build()
        .map_err(init_err("cannot record the table upload"))?;
    sync::now(queue.device().clone())
        .then_execute(queue.clone(), upload)
        .map_err(init_err("cannot upload the PFAC table"))?
        .then_signal_fence_and_flush()
        .map_err(init_err("cannot upload the PFAC table"))?
        .wait(None)
        .map_err(init_err("cannot upload the PFAC table"))?;
    let [a, b, c]: [Subbuffer<[u32]>; 3] = out
        .try_into()
        .map_err(|_| GpuError::Init("table upload lost a buffer".into()))?;
    Ok([a, b, c])
}
