// hub_client.mjs - downloads a checkpoint from `wstore serve` with the real
// @huggingface/hub client (modelInfo, listFiles, fileDownloadInfo,
// downloadFile, snapshotDownload, each given hubUrl) and compares every
// answer and byte with the source directory.  Prints "ok - ..." /
// "not ok - ..." lines for serve_hub.sh to count.
//   node hub_client.mjs NPM_DIR HUB_URL REPO SRC_DIR CACHE_DIR SHA TOKEN
import { createRequire } from "node:module";
import { createHash } from "node:crypto";
import { readFileSync, readdirSync, statSync, existsSync } from "node:fs";
import { join, relative } from "node:path";

const [npmDir, hubUrl, repo, srcDir, cacheDir, wantSha, token] =
	process.argv.slice(2);
const hub = createRequire(join(npmDir, "package.json"))("@huggingface/hub");
const auth = { hubUrl, accessToken: token };

function report(ok, name, detail) {
	console.log(`${ok ? "ok" : "not ok"} - ${name}`);
	if (!ok && detail !== undefined) console.log(`#   ${detail}`);
}

async function check(name, fn) {
	try {
		const r = await fn();
		report(r === true, name, r);
	} catch (e) {
		report(false, name, `threw: ${e.message}`);
	}
}

function walk(dir) {
	const out = {};
	for (const e of readdirSync(dir, { recursive: true })) {
		const p = join(dir, e);
		if (statSync(p).isFile()) out[relative(dir, p)] = p;
	}
	return out;
}

const src = walk(srcDir);
const big = "model-00001-of-00002.safetensors";
const sha256 = (p) => createHash("sha256").update(readFileSync(p)).digest("hex");
const same = (buf, path) => Buffer.from(buf).equals(readFileSync(path));

await check("modelInfo: name and sha", async () => {
	const info = await hub.modelInfo({ name: repo, ...auth,
		additionalFields: ["sha", "siblings"] });
	if (info.name !== repo) return `name ${info.name}`;
	if (info.sha !== wantSha) return `sha ${info.sha}, wanted ${wantSha}`;
	const names = info.siblings.map((s) => s.rfilename).sort();
	const want = Object.keys(src).sort();
	return JSON.stringify(names) === JSON.stringify(want) ||
		`siblings ${names}`;
});

await check("listFiles (recursive): every file with size and LFS oid", async () => {
	const seen = {};
	for await (const e of hub.listFiles({ repo, ...auth, recursive: true }))
		if (e.type === "file") seen[e.path] = e;
	for (const [p, full] of Object.entries(src)) {
		const e = seen[p];
		if (!e) return `missing ${p}`;
		if (e.size !== statSync(full).size) return `size of ${p}`;
		if (p.endsWith(".safetensors") && e.lfs?.oid !== sha256(full))
			return `lfs oid of ${p}`;
	}
	return Object.keys(seen).length === Object.keys(src).length ||
		`extra files: ${Object.keys(seen)}`;
});

await check("listFiles of a directory, not recursive", async () => {
	const seen = [];
	for await (const e of hub.listFiles({ repo, ...auth, path: "sub" }))
		seen.push(`${e.type}:${e.path}`);
	return seen.join(",") === "directory:sub/dir,file:sub/with space.txt" ||
		seen.join(",");
});

await check("fileDownloadInfo: size and sha256 ETag of a weight file", async () => {
	const i = await hub.fileDownloadInfo({ repo, path: big, ...auth });
	return (i.size === statSync(src[big]).size &&
		i.etag.includes(sha256(src[big])) && !i.xet) ||
		JSON.stringify(i);
});

await check("fileDownloadInfo: a missing file is null", async () => {
	const i = await hub.fileDownloadInfo({ repo, path: "nope.bin", ...auth });
	return i === null || JSON.stringify(i);
});

await check("downloadFile: whole weight file byte for byte", async () => {
	const blob = await hub.downloadFile({ repo, path: big, ...auth });
	return same(await blob.arrayBuffer(), src[big]);
});

await check("downloadFile: a slice (Range) across a chunk boundary", async () => {
	const blob = await hub.downloadFile({ repo, path: big, ...auth });
	const a = (1 << 20) - 1000, b = (1 << 20) + 5000;
	const got = Buffer.from(await blob.slice(a, b).arrayBuffer());
	return got.equals(readFileSync(src[big]).subarray(a, b)) ||
		`got ${got.length} bytes`;
});

await check("downloadFile: a nested file with a blank in its name", async () => {
	const blob = await hub.downloadFile({ repo, path: "sub/with space.txt",
		...auth });
	return same(await blob.arrayBuffer(), src["sub/with space.txt"]);
});

await check("snapshotDownload: the whole checkpoint byte for byte", async () => {
	const dir = await hub.snapshotDownload({ repo, ...auth, cacheDir });
	if (!dir.endsWith(wantSha)) return `snapshot folder ${dir}`;
	const got = walk(dir);
	for (const [p, full] of Object.entries(src))
		if (!got[p] || !readFileSync(got[p]).equals(readFileSync(full)))
			return `differs: ${p}`;
	const ref = join(cacheDir, `models--${repo.replace("/", "--")}`,
		"refs", "main");
	if (!existsSync(ref) || readFileSync(ref, "utf8") !== wantSha)
		return "refs/main is not the commit";
	return Object.keys(got).length === Object.keys(src).length ||
		`${Object.keys(got).length} files`;
});

await check("without the token: refused", async () => {
	try {
		await hub.modelInfo({ name: repo, hubUrl });
		return "answered without a token";
	} catch (e) {
		return e.statusCode === 401 || `status ${e.statusCode}`;
	}
});

await check("unknown repository: RepoNotFound as an error", async () => {
	try {
		await hub.modelInfo({ name: "org/nope", ...auth });
		return "answered";
	} catch (e) {
		return e.statusCode === 404 || `status ${e.statusCode}`;
	}
});
