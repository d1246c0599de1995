"""Visibility masks: ROCR filters, HIP indexes the remainder, and the combinations Ray/torch/vLLM reject."""

from __future__ import annotations

from rocmstack.platform.masks import mask_view, process_visibility


def test_no_mask_all_visible():
    view = mask_view("amd", 8, {})
    assert view.visible == tuple(range(8)) and not view.problems


def test_rocr_then_hip_indexes_the_remainder():
    view = mask_view("amd", 8, {"ROCR_VISIBLE_DEVICES": "4,5,6,7", "HIP_VISIBLE_DEVICES": "1,3"})
    assert view.after_rocr == (4, 5, 6, 7)
    assert view.visible == (5, 7)
    assert not view.problems


def test_rocr_without_hip_is_rays_runtime_error():
    view = mask_view("amd", 8, {"ROCR_VISIBLE_DEVICES": "0,1"})
    assert view.visible == (0, 1)
    assert "Please use HIP_VISIBLE_DEVICES instead of ROCR_VISIBLE_DEVICES" in view.problems[0]


def test_hip_and_cuda_disagree():
    view = mask_view("amd", 8, {"HIP_VISIBLE_DEVICES": "0,1", "CUDA_VISIBLE_DEVICES": "1,0"})
    assert any("disagree" in p for p in view.problems)
    assert not mask_view("amd", 8, {"HIP_VISIBLE_DEVICES": "0, 1", "CUDA_VISIBLE_DEVICES": "0,1"}).problems


def test_hip_more_than_rocr_leaves_is_torchs_runtime_error():
    view = mask_view("amd", 8, {"ROCR_VISIBLE_DEVICES": "2", "HIP_VISIBLE_DEVICES": "0,1"})
    assert any("contains more devices than ROCR_VISIBLE_DEVICES" in p for p in view.problems)


def test_cuda_mask_stops_at_first_missing_device():
    view = mask_view("nvidia", 2, {"CUDA_VISIBLE_DEVICES": "1,5,0"})
    assert view.visible == (1,)
    assert "names device 5" in view.problems[0]


def test_inconsistent_mask_on_one_gpu():  # the H200 case: CUDA_VISIBLE_DEVICES=1 with a single GPU
    view = mask_view("nvidia", 1, {"CUDA_VISIBLE_DEVICES": "1"})
    assert view.visible == () and view.visible_count == 0
    assert view.problems


def test_empty_and_nodevfiles_hide_everything():
    assert mask_view("nvidia", 4, {"CUDA_VISIBLE_DEVICES": ""}).visible == ()
    assert mask_view("amd", 4, {"HIP_VISIBLE_DEVICES": "NoDevFiles"}).visible == ()


def test_uuids_cannot_be_resolved_here():
    view = mask_view("nvidia", 2, {"CUDA_VISIBLE_DEVICES": "GPU-886dfc56-d6a4-1cd4-1e44-e94461cc483e"})
    assert view.visible is None and not view.problems


def test_no_gpu_only_structural_rules():
    assert not mask_view("nvidia", 0, {"CUDA_VISIBLE_DEVICES": "3"}).problems
    assert mask_view("amd", 0, {"ROCR_VISIBLE_DEVICES": "0"}).problems


def test_duplicate_index():
    view = mask_view("amd", 4, {"HIP_VISIBLE_DEVICES": "1,1"})
    assert view.visible == (1,) and "twice" in view.problems[0]


def test_a_process_says_what_it_saw_and_which_masks_it_had():
    env = {"CUDA_VISIBLE_DEVICES": "1", "HIP_VISIBLE_DEVICES": "", "PATH": "/bin"}
    assert process_visibility(env, 0) == "0 GPU(s) visible, HIP_VISIBLE_DEVICES='', CUDA_VISIBLE_DEVICES='1'"
    assert process_visibility({}, None) == "? GPU(s) visible, no visibility mask set"
