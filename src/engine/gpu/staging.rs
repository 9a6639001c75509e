//! Staging memory: the pipeline's block buffers, made readable by the device.
//!
//! Each buffer is ordinary page-aligned host memory (an [`AlignedBuf`])
//! imported into Vulkan with `VK_EXT_external_memory_host`: the driver pins
//! it and maps it for the device, and it stays mapped on the host for its
//! whole life (it *is* host memory). Being plain anonymous memory, it takes
//! `O_DIRECT` and io_uring reads like any other buffer, so a block goes from
//! the disk into memory the GPU reads (in place, or by DMA to device-local
//! memory) without one copy by the CPU. (Memory that Vulkan allocates and
//! maps itself is a driver mapping that `O_DIRECT` may refuse, EFAULT, on
//! discrete GPUs; importing host memory avoids the question.)
//!
//! The rest of the crate sees these buffers as [`BlockMemory`] from a
//! [`BufferProvider`]; the engine recognises a haystack that lies in one of
//! them by its address ([`StagingMemory::find`]) and binds that buffer
//! instead of copying the bytes. Without the extension (or if importing
//! fails) the engine offers no staging memory and copies every haystack into
//! a buffer of its own, as before.

use std::ffi::c_void;
use std::sync::{Arc, Mutex, PoisonError};

use vulkano::VulkanObject;
use vulkano::buffer::sys::RawBuffer;
use vulkano::buffer::{BufferCreateInfo, BufferUsage, Subbuffer};
use vulkano::device::Device;
use vulkano::memory::{ExternalMemoryHandleTypes, MemoryPropertyFlags};
use vulkano::sync::Sharing;

use super::one_line;
use crate::source::{AlignedBuf, BlockMemory, BufferProvider, DIRECT_ALIGN};

/// A staging buffer as the engine sees it.
struct Entry {
    addr: usize,
    len: usize,
    buffer: Subbuffer<[u8]>,
}

/// The staging buffers alive now, by host address.
#[derive(Default)]
struct Registry {
    entries: Mutex<Vec<Entry>>,
}

impl Registry {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Entry>> {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Allocates staging buffers for the pipeline's pool and recognises them.
pub(super) struct StagingMemory {
    device: Arc<Device>,
    /// Alignment of address and size: 4 KiB, or the device's
    /// `minImportedHostPointerAlignment` if larger.
    align: usize,
    /// Queue families that read the buffers (concurrent sharing when two).
    families: Vec<u32>,
    registry: Arc<Registry>,
    description: String,
}

impl StagingMemory {
    /// Staging memory for `device` (which has `VK_EXT_external_memory_host`
    /// enabled), read by the queue `families`. Imports one small buffer to
    /// check that the driver accepts host memory; errs with why not.
    pub(super) fn new(
        device: Arc<Device>,
        families: Vec<u32>,
        path: &str,
    ) -> Result<StagingMemory, String> {
        let min = device
            .physical_device()
            .properties()
            .min_imported_host_pointer_alignment
            .unwrap_or(DIRECT_ALIGN as u64);
        let align = usize::try_from(min)
            .ok()
            .filter(|a| a.is_power_of_two())
            .ok_or_else(|| format!("unusable minImportedHostPointerAlignment {min}"))?
            .max(DIRECT_ALIGN);
        let staging = StagingMemory {
            device,
            align,
            families,
            registry: Arc::default(),
            description: format!(
                "gpu staging: host memory imported into Vulkan, {} KiB aligned, {path}",
                align >> 10
            ),
        };
        drop(staging.import(DIRECT_ALIGN)?);
        Ok(staging)
    }

    /// The device buffer holding `window` (its bytes padded to a multiple of
    /// 4, as the shader reads words), when `window` lies in a staging buffer
    /// at an offset the device can bind (a multiple of `offset_align`).
    ///
    /// The caller must use the returned buffer only while it borrows
    /// `window`: the borrow is what keeps the staging buffer alive and its
    /// bytes unchanged.
    pub(super) fn find(&self, window: &[u8], offset_align: u64) -> Option<Subbuffer<[u8]>> {
        let start = window.as_ptr() as usize;
        let padded = window.len().next_multiple_of(4);
        let entries = self.registry.lock();
        let e = entries
            .iter()
            .find(|e| start >= e.addr && start - e.addr + padded <= e.len)?;
        let offset = (start - e.addr) as u64;
        if !offset.is_multiple_of(offset_align.max(4)) {
            return None;
        }
        Some(e.buffer.clone().slice(offset..offset + padded as u64))
    }

    /// Imports `len` bytes (rounded up to the alignment) of fresh host memory.
    fn import(&self, len: usize) -> Result<StagingBuffer, String> {
        let size = len.max(1).next_multiple_of(self.align);
        let host = AlignedBuf::with_alignment(size, self.align)
            .ok_or_else(|| format!("cannot allocate {size} bytes aligned to {}", self.align))?;
        let addr = host.as_slice().as_ptr() as usize;
        let device = &self.device;
        let fns = device.fns();
        let handle_type = ash::vk::ExternalMemoryHandleTypeFlags::HOST_ALLOCATION_EXT;

        let mut pointer_props = ash::vk::MemoryHostPointerPropertiesEXT::default();
        // SAFETY: the extension is enabled on `device` (checked by the
        // engine before creating this object), `addr` is a live host
        // allocation aligned to minImportedHostPointerAlignment, and
        // `pointer_props` is a properly initialised output structure.
        unsafe {
            (fns.ext_external_memory_host
                .get_memory_host_pointer_properties_ext)(
                device.handle(),
                handle_type,
                addr as *const c_void,
                &mut pointer_props,
            )
        }
        .result()
        .map_err(|e| format!("vkGetMemoryHostPointerPropertiesEXT: {e}"))?;

        let raw = RawBuffer::new(
            device.clone(),
            BufferCreateInfo {
                usage: BufferUsage::STORAGE_BUFFER | BufferUsage::TRANSFER_SRC,
                size: size as u64,
                sharing: if self.families.len() > 1 {
                    Sharing::Concurrent(self.families.clone().into())
                } else {
                    Sharing::Exclusive
                },
                external_memory_handle_types: ExternalMemoryHandleTypes::HOST_ALLOCATION,
                ..Default::default()
            },
        )
        .map_err(|e| format!("cannot create a staging buffer: {}", one_line(e)))?;
        let req = raw.memory_requirements();
        if req.layout.size() > size as u64
            || req.layout.alignment().as_devicesize() > self.align as u64
        {
            return Err(format!(
                "a staging buffer of {size} bytes needs {} bytes aligned to {}",
                req.layout.size(),
                req.layout.alignment().as_devicesize()
            ));
        }
        // Host-coherent types only: the host writes through its own pointer
        // and never flushes.
        let types = &device.physical_device().memory_properties().memory_types;
        let bits = req.memory_type_bits & pointer_props.memory_type_bits;
        let type_index = (0..types.len() as u32)
            .find(|&i| {
                bits & (1 << i) != 0
                    && types[i as usize].property_flags.contains(
                        MemoryPropertyFlags::HOST_VISIBLE | MemoryPropertyFlags::HOST_COHERENT,
                    )
            })
            .ok_or_else(|| {
                "no host-coherent memory type accepts imported host memory for a buffer".to_string()
            })?;

        let mut import = ash::vk::ImportMemoryHostPointerInfoEXT::default()
            .handle_type(handle_type)
            .host_pointer(addr as *mut c_void);
        let info = ash::vk::MemoryAllocateInfo::default()
            .allocation_size(size as u64)
            .memory_type_index(type_index)
            .push_next(&mut import);
        let mut memory = ash::vk::DeviceMemory::null();
        // SAFETY: `info` is a valid allocation request importing `size`
        // bytes at `addr`: aligned as the device requires, a size that is a
        // multiple of that alignment, a memory type the device reported for
        // this pointer. The host allocation outlives the memory object
        // (StagingBuffer frees the memory first, see its Drop).
        unsafe {
            (fns.v1_0.allocate_memory)(device.handle(), &info, std::ptr::null(), &mut memory)
        }
        .result()
        .map_err(|e| format!("cannot import host memory: {e}"))?;
        // SAFETY: buffer and memory belong to `device`; the memory type is
        // allowed by the buffer's requirements, offset 0 satisfies their
        // alignment and the memory is at least the required size.
        let bound =
            unsafe { (fns.v1_0.bind_buffer_memory)(device.handle(), raw.handle(), memory, 0) }
                .result();
        if let Err(e) = bound {
            // SAFETY: the memory was allocated above and nothing uses it.
            unsafe { (fns.v1_0.free_memory)(device.handle(), memory, std::ptr::null()) };
            return Err(format!("cannot bind imported memory: {e}"));
        }
        // SAFETY: memory was bound to the buffer just above.
        let buffer = Subbuffer::new(Arc::new(unsafe { raw.assume_bound() }));
        self.registry.lock().push(Entry {
            addr,
            len: size,
            buffer: buffer.clone(),
        });
        Ok(StagingBuffer {
            buffer: Some(buffer),
            memory,
            device: device.clone(),
            registry: Arc::clone(&self.registry),
            host: Some(host),
            addr,
        })
    }
}

impl BufferProvider for StagingMemory {
    fn describe(&self) -> String {
        self.description.clone()
    }

    fn allocate(&self, capacity: usize) -> Result<Box<dyn BlockMemory>, String> {
        Ok(Box::new(self.import(capacity)?))
    }

    /// A buffer that is not staging memory (the heap's, read before the
    /// GPU was set up) is replaced by staging memory.
    fn replaces(&self, buf: &dyn BlockMemory) -> bool {
        let addr = buf.as_slice().as_ptr() as usize;
        !self.registry.lock().iter().any(|e| e.addr == addr)
    }
}

/// One staging buffer: host memory, the Vulkan memory object importing it,
/// and the buffer bound to that memory.
struct StagingBuffer {
    /// `None` only during drop.
    buffer: Option<Subbuffer<[u8]>>,
    memory: ash::vk::DeviceMemory,
    device: Arc<Device>,
    registry: Arc<Registry>,
    /// `None` only during drop.
    host: Option<AlignedBuf>,
    addr: usize,
}

impl BlockMemory for StagingBuffer {
    fn as_slice(&self) -> &[u8] {
        self.host.as_ref().map_or(&[], |h| h.as_slice())
    }
    fn as_mut_slice(&mut self) -> &mut [u8] {
        self.host.as_mut().map_or(&mut [], |h| h.as_mut_slice())
    }
}

impl Drop for StagingBuffer {
    fn drop(&mut self) {
        self.registry.lock().retain(|e| e.addr != self.addr);
        let (Some(buffer), Some(host)) = (self.buffer.take(), self.host.take()) else {
            return;
        };
        // The engine's clones of the buffer live only while a search borrows
        // this memory, and a failed wait for the device leaks them; a clone
        // still alive here means the device may still read: leak all rather
        // than free memory it may touch.
        if Arc::strong_count(buffer.buffer()) != 1 {
            std::mem::forget(buffer);
            std::mem::forget(host);
            return;
        }
        drop(buffer); // destroys the VkBuffer
        // SAFETY: the memory was allocated in `import`, the only buffer bound
        // to it was destroyed just above, and no submission uses it (the
        // buffer had no other owner).
        unsafe {
            (self.device.fns().v1_0.free_memory)(
                self.device.handle(),
                self.memory,
                std::ptr::null(),
            )
        };
        drop(host);
    }
}
