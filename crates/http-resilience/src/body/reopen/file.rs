//! A file as a [`ReopenBody`]: opened again from its start for every attempt,
//! its length known from its metadata before the first one (feature `fs`).

use super::ReopenBody;
use bytes::{Bytes, BytesMut};
use http_body::{Body, Frame, SizeHint};
use std::{
    fmt,
    future::Future,
    io,
    path::{Path, PathBuf},
    pin::Pin,
    sync::Arc,
    task::{ready, Context, Poll},
};
use tokio::io::{AsyncRead, ReadBuf};

/// The most a [`FileBody`] reads at a time, and so the largest frame it
/// yields: 64 KiB.
const BLOCK: u64 = 64 * 1024;

// ===== impl ReopenBody =====

impl ReopenBody<FileSource> {
    /// The file at `path` as a request body (feature `fs`): opened again from
    /// its start for every attempt that sends it, read in blocks of 64 KiB,
    /// its length read from the file's metadata now, so that every attempt,
    /// the first included, announces it as its exact size hint (hyper's
    /// `Content-Length`).
    ///
    /// Every attempt sends that length or fails: a file whose length at an
    /// attempt's opening is another fails that attempt with
    /// [`BodyChanged`](super::BodyChanged) before any byte is sent; one that
    /// comes out shorter while it is read fails with it where it ends; one
    /// that grows while it is read sends the length announced (what it grew
    /// by is not read). A file that cannot be opened again fails the attempt
    /// with [`ReopenFailed`](super::ReopenFailed), the `io::Error` as its
    /// source. Opening and reading run on tokio's blocking pool, as
    /// `tokio::fs` does, so the body is read within a tokio runtime.
    ///
    /// # Errors
    ///
    /// The `io::Error` of reading the file's metadata (no such file, no
    /// permission), or one of kind `InvalidInput` when `path` is not a
    /// regular file (a directory, a pipe, a device: none has a length to
    /// announce).
    ///
    /// # Example
    ///
    /// ```
    /// use http_body::Body;
    /// use http_body_util::BodyExt;
    /// use http_resilience::body::{ReopenBody, TryCloneBody};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), http_resilience::BoxError> {
    /// # let path = std::env::temp_dir().join(format!("reopen-file-doc-{}", std::process::id()));
    /// # std::fs::write(&path, "the upload")?;
    /// let body = ReopenBody::file(&path).await?;
    /// assert_eq!(body.size_hint().exact(), Some(10));
    /// let copy = body.try_clone_body().expect("a file opens again");
    /// assert_eq!(body.collect().await?.to_bytes(), "the upload");
    /// assert_eq!(copy.collect().await?.to_bytes(), "the upload");
    /// # std::fs::remove_file(path)?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn file(path: impl AsRef<Path>) -> io::Result<Self> {
        let path = path.as_ref();
        let metadata = tokio::fs::metadata(path).await?;
        if !metadata.is_file() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "not a regular file",
            ));
        }
        let source = FileSource {
            path: Arc::from(path),
        };
        Ok(Self::with_length(source, metadata.len()))
    }
}

// ===== impl FileSource =====

/// The factory of a file body ([`Reopen`](super::Reopen)): a path, opened
/// again from its start for every attempt. [`ReopenBody::file`] makes one.
#[derive(Debug, Clone)]
pub struct FileSource {
    path: Arc<Path>,
}

impl FileSource {
    /// The path of the file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl super::Reopen for FileSource {
    type Body = FileBody;
    type Error = io::Error;
    // NOTE: boxed, once per attempt: an opening is a system call and a trip
    // to the blocking pool already.
    type Future = Pin<Box<dyn Future<Output = io::Result<FileBody>> + Send + Sync>>;

    /// Opens the file on tokio's blocking pool, and reads its length there.
    fn reopen(&self) -> Self::Future {
        let path = PathBuf::from(&*self.path);
        let runtime = tokio::runtime::Handle::try_current();
        let task = runtime.map(|runtime| runtime.spawn_blocking(move || open(&path)));
        Box::pin(async move {
            // NOTE: outside a runtime nothing was started, and the opening
            // fails (an error of kind `Other`) rather than panicking; a
            // blocking task fails only when the runtime shuts down.
            let opened = task.map_err(io::Error::other)?.await;
            let (file, length) = opened.map_err(io::Error::other)??;
            Ok(FileBody {
                file: tokio::fs::File::from_std(file),
                left: length,
            })
        })
    }
}

/// Opens `path` and reads its length.
fn open(path: &Path) -> io::Result<(std::fs::File, u64)> {
    let file = std::fs::File::open(path)?;
    let length = file.metadata()?.len();
    Ok((file, length))
}

// ===== impl FileBody =====

/// A file opened by a [`FileSource`], read from its start in blocks of
/// 64 KiB: as many bytes as its metadata gave when it was opened, which is
/// its exact size hint, or fewer if it ends before them.
pub struct FileBody {
    file: tokio::fs::File,
    // The bytes of the length read at the opening that are not read yet.
    left: u64,
}

impl Body for FileBody {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<io::Result<Frame<Bytes>>>> {
        if self.left == 0 {
            return Poll::Ready(None);
        }
        // NOTE: `left.min(BLOCK)` fits a `usize`, as `BLOCK` does.
        let mut block = BytesMut::zeroed(self.left.min(BLOCK) as usize);
        let mut read = ReadBuf::new(&mut block);
        ready!(Pin::new(&mut self.file).poll_read(cx, &mut read))?;
        let n = read.filled().len();
        if n == 0 {
            // NOTE: the file is shorter than it was: `ReopenBody` fails it.
            self.left = 0;
            return Poll::Ready(None);
        }
        self.left -= n as u64;
        block.truncate(n);
        Poll::Ready(Some(Ok(Frame::data(block.freeze()))))
    }

    fn is_end_stream(&self) -> bool {
        self.left == 0
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.left)
    }
}

impl fmt::Debug for FileBody {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FileBody")
            .field("left", &self.left)
            .finish_non_exhaustive()
    }
}
